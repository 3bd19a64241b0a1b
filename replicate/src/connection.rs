//! The sans-IO connection: packet header with sequence number and acks, delivered and
//! lost notifications in send order, RTT estimation. Never touches a socket or a clock:
//! time comes in as a [`std::time::Duration`] since an arbitrary epoch.

/// A packet sequence number (wraps at 2^16).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct PacketSequence(pub u16);

impl PacketSequence {
    /// The following sequence number.
    pub const fn next(self) -> Self {
        Self(self.0.wrapping_add(1))
    }

    /// Whether `self` is newer than `other`, modulo wraparound.
    pub const fn is_newer_than(self, other: Self) -> bool {
        let d = self.0.wrapping_sub(other.0);
        d != 0 && d < 0x8000
    }
}

/// What became of a sent packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DeliveryStatus {
    /// The peer acknowledged it.
    Delivered,
    /// It is considered lost (not acknowledged in time, or fell out of the ack window).
    Lost,
    /// The connection is closing; the record should be released without acting on it.
    Discard,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sequence_wraps() {
        assert!(PacketSequence(1).is_newer_than(PacketSequence(0)));
        assert!(PacketSequence(0).is_newer_than(PacketSequence(65535)));
        assert!(!PacketSequence(65535).is_newer_than(PacketSequence(0)));
        assert!(!PacketSequence(5).is_newer_than(PacketSequence(5)));
        assert_eq!(PacketSequence(65535).next(), PacketSequence(0));
    }
}
