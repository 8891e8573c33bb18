//! The contents of every block: derived from a seed, so that the workload, the initiator and
//! the target all know what a block must hold without keeping its data. A leaf module: the
//! block layer and SRP both build on it.

/// Bytes of one logical block.
pub const BLOCK_SIZE: usize = 4096;

/// FNV-1a, 64 bits: enough to tell one block's contents from another's.
pub fn checksum(data: &[u8]) -> u64 {
    data.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

fn splitmix(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Fills `buf` with the byte stream of `seed`.
pub fn fill_pattern(seed: u64, buf: &mut [u8]) {
    let mut state = seed;
    for chunk in buf.chunks_mut(8) {
        let v = splitmix(&mut state).to_le_bytes();
        chunk.copy_from_slice(&v[..chunk.len()]);
    }
}

/// Seed of a block's contents before anyone wrote it.
pub fn initial_seed(lun_id: u32, lba: u64) -> u64 {
    0xb10c_0000_0000_0000 ^ (u64::from(lun_id) << 40) ^ lba
}

/// Seed of the data written by I/O `id` at `lba`.
pub fn write_seed(id: u64, lba: u64) -> u64 {
    0x5eed_0000_0000_0000 ^ (id << 24) ^ lba
}
