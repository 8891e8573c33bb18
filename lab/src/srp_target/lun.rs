//! The blocks of one LUN. A block holds the pattern of a seed until something else is
//! written to it (`pattern.rs`): the workloads write nothing else, so a LUN of 64 blocks
//! costs 64 seeds, not 256 KB, and a fleet of ten thousand hosts fits. What the target
//! reads back is the same bytes either way.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::vec::Vec;

use crate::pattern::{fill_pattern, initial_seed, pattern_seed};
use ibal::io::BLOCK_SIZE;

/// One block's contents.
#[derive(Debug, Clone)]
enum Block {
    /// The pattern of this seed.
    Pattern(u64),
    /// Anything else, as written.
    Data(Box<[u8]>),
}

/// The blocks of one LUN, shared by the target ports every path to it reaches: what one
/// path writes, another reads.
#[derive(Debug, Clone)]
pub struct Lun(Arc<Mutex<Blocks>>);

#[derive(Debug)]
pub(super) struct Blocks {
    blocks: Vec<Block>,
    /// Blocks written with something other than a pattern (each kept whole).
    data_blocks: u64,
}

impl Lun {
    /// `n_blocks` blocks, each filled with a pattern the initiator's workload can predict.
    pub fn new(lun_id: u32, n_blocks: u64) -> Self {
        let blocks = (0..n_blocks)
            .map(|lba| Block::Pattern(initial_seed(lun_id, lba)))
            .collect();
        Lun(Arc::new(Mutex::new(Blocks {
            blocks,
            data_blocks: 0,
        })))
    }

    /// The blocks; a port that panicked with them held left them whole (a block is
    /// written by one assignment), so the lock is taken over.
    pub(super) fn lock(&self) -> MutexGuard<'_, Blocks> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Blocks {
    /// Its size in bytes.
    pub(super) fn len(&self) -> usize {
        self.blocks.len() * BLOCK_SIZE
    }

    /// Copies the blocks from byte `start` (a block's) into `out` (whole blocks).
    pub(super) fn read(&self, start: usize, out: &mut [u8]) {
        let first = start / BLOCK_SIZE;
        for (b, chunk) in self.blocks[first..]
            .iter()
            .zip(out.chunks_exact_mut(BLOCK_SIZE))
        {
            match b {
                Block::Pattern(seed) => fill_pattern(*seed, chunk),
                Block::Data(d) => chunk.copy_from_slice(d),
            }
        }
    }

    /// Writes `data` (whole blocks) from byte `start` (a block's). A block that is not a
    /// pattern is kept whole: the one case that allocates, which no workload of the lab
    /// causes (counted: `data_blocks`).
    pub(super) fn write(&mut self, start: usize, data: &[u8]) {
        let first = start / BLOCK_SIZE;
        for (b, chunk) in self.blocks[first..]
            .iter_mut()
            .zip(data.chunks_exact(BLOCK_SIZE))
        {
            *b = match pattern_seed(chunk) {
                Some(seed) => Block::Pattern(seed),
                None => {
                    self.data_blocks += 1;
                    Block::Data(chunk.into())
                }
            };
        }
    }

    /// Blocks written with something other than a pattern.
    pub(super) fn data_blocks(&self) -> u64 {
        self.data_blocks
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pattern::write_seed;

    #[test]
    fn what_is_written_reads_back_pattern_or_not() {
        let lun = Lun::new(3, 4);
        let mut blocks = lun.lock();
        assert_eq!(blocks.len(), 4 * BLOCK_SIZE);
        let mut out = std::vec![0u8; 2 * BLOCK_SIZE];
        blocks.read(BLOCK_SIZE, &mut out);
        let mut want = std::vec![0u8; BLOCK_SIZE];
        fill_pattern(initial_seed(3, 2), &mut want);
        assert_eq!(&out[BLOCK_SIZE..], &want[..]);
        // A pattern written, then bytes that are none, side by side.
        let mut data = std::vec![0u8; 2 * BLOCK_SIZE];
        fill_pattern(write_seed(9, 1), &mut data[..BLOCK_SIZE]);
        data[BLOCK_SIZE..].fill(0xa5);
        blocks.write(BLOCK_SIZE, &data);
        blocks.read(BLOCK_SIZE, &mut out);
        assert_eq!(out, data);
        assert_eq!(blocks.data_blocks(), 1);
        // The block after is untouched.
        let mut last = std::vec![0u8; BLOCK_SIZE];
        blocks.read(3 * BLOCK_SIZE, &mut last);
        fill_pattern(initial_seed(3, 3), &mut want);
        assert_eq!(last, want);
    }
}
