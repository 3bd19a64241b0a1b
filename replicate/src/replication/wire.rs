//! The object batch framing shared by the writer, the reader and delta compression:
//! the size prefix of a batch (`[0][size: 7]` or `[1][size: 16]`, with the huge-object
//! escape) and [`ObjectReadError`], why one batch could not be used.

use crate::bits::{BitReader, BitWriter};
use crate::protocol::ProtocolIndex;
use crate::serialize::SerializeError;
use thiserror::Error;

/// The name of the replication data stream (the writer's and the reader's).
pub const REPLICATION_STREAM_NAME: &str = "replication";

/// Bits of the long form of a batch's size prefix: a batch holds at most `2^16 - 2`
/// bits; a creation larger than that (or than an empty packet) is a huge object, whose
/// batch (inside its blob) has the escape `2^16 - 1` and a 32-bit size.
pub const BATCH_SIZE_BITS: u32 = 16;

/// Bits of the short form of a batch's size prefix (bodies of fewer than `2^7` bits:
/// nearly every update; S1 and S3 measured 95% and 100%). The prefix is
/// `[0][size: 7]` or `[1][size: 16]` (see the module docs): 8 bits instead of 16 for a
/// small batch, 17 for a large one.
pub const SHORT_BATCH_SIZE_BITS: u32 = 7;

/// The batch-size escape announcing a 32-bit size (see the module docs).
pub const WIDE_BATCH_SIZE: u64 = (1 << BATCH_SIZE_BITS) - 1;

/// Writes a batch's size prefix (`[0][size: 7]` or `[1][size: 16]`, see the module
/// docs) for a body of `size` bits. Returns false (and writes nothing) when `size`
/// needs the huge-object form (at least `2^16 - 1` bits).
pub fn write_batch_size(w: &mut BitWriter, size: usize) -> bool {
    if size < 1 << SHORT_BATCH_SIZE_BITS {
        w.write_bool(false);
        w.write_bits(size as u64, SHORT_BATCH_SIZE_BITS);
        true
    } else if (size as u64) < WIDE_BATCH_SIZE {
        w.write_bool(true);
        w.write_bits(size as u64, BATCH_SIZE_BITS);
        true
    } else {
        false
    }
}

/// Reads a batch's size prefix, any of its three forms (a huge object's included).
/// Never panics; a truncated prefix leaves `r` in its error state (check it).
pub fn read_batch_size(r: &mut BitReader) -> usize {
    if !r.read_bool() {
        return r.read_bits(SHORT_BATCH_SIZE_BITS) as usize;
    }
    let size = r.read_bits(BATCH_SIZE_BITS);
    if size == WIDE_BATCH_SIZE {
        r.read_bits(32) as usize
    } else {
        size as usize
    }
}

/// Why one object's batch could not be used.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ObjectReadError {
    /// The creation names a protocol index this side does not know.
    #[error("unknown protocol index {0}")]
    UnknownProtocol(u64),
    /// A state update for an object this side does not have.
    #[error("update for an unknown object")]
    UnknownHandle,
    /// A creation for a known object with another type.
    #[error("creation with protocol {got} for an object of protocol {expected}")]
    ProtocolMismatch {
        /// The local protocol.
        expected: ProtocolIndex,
        /// The received one.
        got: u64,
    },
    /// A static object the game did not register on this side.
    #[error("static object not registered on this side")]
    StaticNotRegistered,
    /// The batch uses delta compression, which this reader does not support (kept for
    /// compatibility; this reader decodes delta batches).
    #[error("delta-compressed batch not supported")]
    DeltaUnsupported,
    /// A delta batch names a baseline this side does not have.
    #[error("delta batch against baseline {0}, which this side does not have")]
    MissingBaseline(u8),
    /// The members did not decode or validate.
    #[error(transparent)]
    Decode(#[from] SerializeError),
    /// The batch had bits left over after its members (corrupt or mismatched types).
    #[error("{0} bits left over after the object's members")]
    TrailingBits(usize),
    /// Too many objects.
    #[error("object limit of {0} reached")]
    TooManyObjects(usize),
    /// A net token this side never received an export for.
    #[error("unknown net token {0}")]
    UnknownToken(u16),
}

impl ObjectReadError {
    pub(crate) fn breaks_object(&self) -> bool {
        !matches!(self, ObjectReadError::UnknownHandle)
    }
}
