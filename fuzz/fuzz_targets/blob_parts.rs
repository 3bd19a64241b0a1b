//! Message channels and blob parts: channel sections of every delivery mode, and parts
//! into an assembler with small caps. Never a panic; the assembler stays within its cap.
#![no_main]

use libfuzzer_sys::fuzz_target;
use replicate::bits::BitReader;
use replicate::internals::blob::{
    BlobAssembler, ChannelConfig, ChannelReceiver, DeliveryMode, PartialBlob, SplitConfig,
};
use replicate_fuzz::packets;

fuzz_target!(|data: &[u8]| {
    let split = SplitConfig {
        max_part_bits: 256,
        max_part_count: 64,
    };
    let cap = 4096;
    let mut assembler = BlobAssembler::new(split).with_max_blob_bits(cap);
    let mut channels = [
        DeliveryMode::ReliableOrdered,
        DeliveryMode::ReliableUnordered,
        DeliveryMode::Unreliable,
    ]
    .map(|m| {
        let mut c = ChannelConfig::new(m);
        c.max_buffered_bits = 1 << 16;
        c.window = 64;
        ChannelReceiver::new(c)
    });
    for (step, packet) in packets(data) {
        let mut r = BitReader::new(packet);
        if step % 2 == 0 {
            let channel = &mut channels[(step as usize / 2) % 3];
            let _ = channel.read(&mut r);
            while channel.receive().is_some() {}
        } else if let Ok(part) = PartialBlob::read(&mut r, &split) {
            let _ = assembler.add_part(part);
            assert!(assembler.buffered_bits() as u64 <= cap);
        }
    }
});
