//! The contents of every block: derived from a seed, so that the workload, the initiator and
//! the target all know what a block must hold without keeping its data. A leaf module: the
//! block layer and SRP both build on it.

pub use ibal::io::checksum;

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
    let mut words = buf.chunks_exact_mut(8);
    for chunk in &mut words {
        chunk.copy_from_slice(&splitmix(&mut state).to_le_bytes());
    }
    let tail = words.into_remainder();
    let v = splitmix(&mut state).to_le_bytes();
    let n = tail.len();
    tail.copy_from_slice(&v[..n]);
}

/// Seed of a block's contents before anyone wrote it.
pub fn initial_seed(lun_id: u32, lba: u64) -> u64 {
    0xb10c_0000_0000_0000 ^ (u64::from(lun_id) << 40) ^ lba
}

/// Seed of the data written by I/O `id` at `lba`.
pub fn write_seed(id: u64, lba: u64) -> u64 {
    0x5eed_0000_0000_0000 ^ (id << 24) ^ lba
}

#[cfg(test)]
mod tests {
    use super::*;
    use ibal::io::BLOCK_SIZE;

    #[test]
    fn any_changed_byte_changes_the_checksum_tail_included() {
        let mut block = std::vec![0u8; BLOCK_SIZE + 5];
        fill_pattern(initial_seed(1, 7), &mut block);
        let want = checksum(&block);
        for at in [0, 7, 8, 1000, BLOCK_SIZE - 1, BLOCK_SIZE, BLOCK_SIZE + 4] {
            block[at] ^= 0x40;
            assert_ne!(checksum(&block), want, "byte {at}");
            block[at] ^= 0x40;
        }
        assert_eq!(checksum(&block), want);
    }

    #[test]
    fn a_pattern_depends_on_its_seed_and_fills_a_tail() {
        let (mut a, mut b) = (std::vec![0u8; 13], std::vec![0u8; 13]);
        fill_pattern(write_seed(1, 2), &mut a);
        fill_pattern(write_seed(2, 2), &mut b);
        assert_ne!(a, b);
        assert_ne!(&a[8..], &[0u8; 5], "the tail is filled");
        let mut again = std::vec![0u8; 13];
        fill_pattern(write_seed(1, 2), &mut again);
        assert_eq!(a, again);
    }
}
