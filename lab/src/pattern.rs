//! The contents of every block: derived from a seed, so that the workload, the initiator and
//! the target all know what a block must hold without keeping its data. A leaf module: the
//! block layer and SRP both build on it.

pub use ibal::io::checksum;

const GOLDEN: u64 = 0x9e37_79b9_7f4a_7c15;
const MUL_1: u64 = 0xbf58_476d_1ce4_e5b9;
const MUL_2: u64 = 0x94d0_49bb_1331_11eb;

fn splitmix(state: &mut u64) -> u64 {
    *state = state.wrapping_add(GOLDEN);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(MUL_1);
    z = (z ^ (z >> 27)).wrapping_mul(MUL_2);
    z ^ (z >> 31)
}

/// The inverse of an odd number modulo 2^64 (Newton's iteration doubles the bits right).
const fn inverse(a: u64) -> u64 {
    let mut x = a;
    let mut i = 0;
    while i < 6 {
        x = x.wrapping_mul(2u64.wrapping_sub(a.wrapping_mul(x)));
        i += 1;
    }
    x
}

/// The `x` of `y = x ^ (x >> shift)`.
fn unshift(y: u64, shift: u32) -> u64 {
    let mut x = y;
    for _ in 0..64 / shift {
        x = y ^ (x >> shift);
    }
    x
}

/// The seed whose pattern `block` is, if it is one: its first word gives the seed (each
/// step of `splitmix` is invertible) and the rest must follow from it. A target keeps a
/// block so as eight bytes rather than four thousand.
pub fn pattern_seed(block: &[u8]) -> Option<u64> {
    let first: [u8; 8] = block.get(..8)?.try_into().ok()?;
    let mut z = u64::from_le_bytes(first);
    z = unshift(z, 31).wrapping_mul(inverse(MUL_2));
    z = unshift(z, 27).wrapping_mul(inverse(MUL_1));
    let seed = unshift(z, 30).wrapping_sub(GOLDEN);
    let mut state = seed;
    let mut words = block.chunks_exact(8);
    for chunk in &mut words {
        if chunk != splitmix(&mut state).to_le_bytes() {
            return None;
        }
    }
    let tail = words.remainder();
    let v = splitmix(&mut state).to_le_bytes();
    (tail == &v[..tail.len()]).then_some(seed)
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
    fn a_pattern_gives_back_its_seed_and_anything_else_none() {
        let mut block = std::vec![0u8; BLOCK_SIZE];
        for seed in [0, 1, u64::MAX, initial_seed(3, 9), write_seed(77, 5)] {
            fill_pattern(seed, &mut block);
            assert_eq!(pattern_seed(&block), Some(seed));
            // One byte off anywhere, the last included, and it is data, not a pattern.
            for at in [0, 8, BLOCK_SIZE - 1] {
                block[at] ^= 1;
                assert_eq!(pattern_seed(&block), None, "seed {seed} byte {at}");
                block[at] ^= 1;
            }
        }
        assert_eq!(pattern_seed(&[0u8; BLOCK_SIZE]), None);
        assert_eq!(pattern_seed(&[1, 2, 3]), None);
        let mut odd = std::vec![0u8; 13];
        fill_pattern(42, &mut odd);
        assert_eq!(pattern_seed(&odd), Some(42));
    }

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
