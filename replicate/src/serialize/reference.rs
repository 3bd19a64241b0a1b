//! Object references: the wire encoding of a [`NetRefHandle`] and
//! [`NetRefHandleSerializer`], the serializer of `NetRefHandle` members.

use super::{NetDefault, NetSerializer, NoConfig, Result, SerializeError};
use crate::bits::{BitReader, BitWriter, bits_needed};
use crate::handle::NetRefHandle;

impl NetRefHandle {
    /// Writes the id: `[0]` for invalid, else `[1][bit length - 1: 6][id]`.
    pub fn write(self, w: &mut BitWriter) {
        if w.write_bool(self.is_valid()) {
            let id = self.id();
            let n = bits_needed(id);
            w.write_bits((n - 1) as u64, 6);
            w.write_bits(id, n);
        }
    }

    /// Reads what [`write`](Self::write) wrote. The replication system id is not sent;
    /// the receiver's own is applied by the caller.
    pub fn read(r: &mut BitReader) -> Result<Self> {
        if !r.read_bool() {
            r.check()?;
            return Ok(Self::INVALID);
        }
        let n = r.read_bits(6) as u32 + 1;
        if n > Self::ID_BITS {
            return Err(SerializeError::invalid(
                "NetRefHandle",
                "id wider than 60 bits",
            ));
        }
        let id = r.read_bits(n);
        r.check()?;
        if id == 0 {
            return Err(SerializeError::invalid(
                "NetRefHandle",
                "a valid handle with id 0",
            ));
        }
        Ok(Self::from_id(id, 0))
    }
}

/// Serializer for [`NetRefHandle`] members (object references). See
/// [`NetRefHandle::write`] for the encoding: 1 bit for none, else 7 bits plus the id's
/// bit length.
#[derive(Debug, Clone, Copy, Default)]
pub struct NetRefHandleSerializer;

impl NetSerializer for NetRefHandleSerializer {
    type Source = NetRefHandle;
    type Quantized = NetRefHandle;
    type Config = NoConfig;
    const NAME: &'static str = "NetRefHandle";
    const HAS_OBJECT_REFERENCES: bool = true;

    fn quantize(_: &NoConfig, source: &NetRefHandle) -> NetRefHandle {
        *source
    }
    fn dequantize(_: &NoConfig, q: &NetRefHandle) -> NetRefHandle {
        *q
    }
    fn serialize(_: &NoConfig, q: &NetRefHandle, w: &mut BitWriter) {
        q.write(w)
    }
    fn deserialize(_: &NoConfig, r: &mut BitReader) -> Result<NetRefHandle> {
        NetRefHandle::read(r)
    }
    fn is_equal(_: &NoConfig, a: &NetRefHandle, b: &NetRefHandle) -> bool {
        a.value() == b.value() || (a == b)
    }
    fn max_bits(_: &NoConfig) -> Option<u32> {
        Some(1 + 6 + NetRefHandle::ID_BITS)
    }
    fn collect_references(_: &NoConfig, q: &NetRefHandle, out: &mut Vec<NetRefHandle>) {
        if q.is_valid() {
            out.push(*q);
        }
    }
}

impl NetDefault for NetRefHandle {
    type Serializer = NetRefHandleSerializer;
}
