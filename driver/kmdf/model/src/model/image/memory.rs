//! Pages from the host with the protections the image's memory has on Windows: a mapping
//! nothing may touch (a register window, a stack's guard page), read-only data, code.

pub(crate) const PAGE: usize = 4096;

/// Pages mapped with mmap, unmapped when dropped.
#[derive(Debug)]
pub(crate) struct Region {
    base: usize,
    len: usize,
}

impl Region {
    /// `len` bytes (rounded up to pages) that fault on any access until given a protection.
    pub(crate) fn reserve(len: usize) -> Result<Self, String> {
        let len = len.div_ceil(PAGE).max(1) * PAGE;
        // SAFETY: an anonymous private mapping of fresh pages: no memory of ours is touched.
        let p = unsafe {
            libc::mmap(
                core::ptr::null_mut(),
                len,
                libc::PROT_NONE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(format!(
                "mmap of {len} bytes: {}",
                std::io::Error::last_os_error()
            ));
        }
        Ok(Self {
            base: p as usize,
            len,
        })
    }

    pub(crate) fn base(&self) -> usize {
        self.base
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }

    pub(crate) fn contains(&self, at: usize) -> bool {
        at >= self.base && at < self.base + self.len
    }

    pub(crate) fn make_writable(&mut self, offset: usize, len: usize) -> Result<(), String> {
        self.protect(offset, len, true, false)
    }

    /// Sets the protection of the pages that hold `offset..offset + len` (readable always).
    pub(crate) fn protect(
        &mut self,
        offset: usize,
        len: usize,
        write: bool,
        execute: bool,
    ) -> Result<(), String> {
        let start = offset / PAGE * PAGE;
        let end = (offset + len).div_ceil(PAGE) * PAGE;
        if end > self.len || len == 0 {
            return if len == 0 {
                Ok(())
            } else {
                Err(format!("pages {start:#x}..{end:#x} past {:#x}", self.len))
            };
        }
        let mut prot = libc::PROT_READ;
        if write {
            prot |= libc::PROT_WRITE;
        }
        if execute {
            prot |= libc::PROT_EXEC;
        }
        // SAFETY: pages of this mapping (checked above); nothing borrowed from them is live
        // across the change (the callers hold no slice of them).
        let r = unsafe { libc::mprotect((self.base + start) as *mut _, end - start, prot) };
        if r != 0 {
            return Err(format!("mprotect: {}", std::io::Error::last_os_error()));
        }
        Ok(())
    }

    /// The whole region as bytes: only once every page is readable and writable.
    pub(crate) fn bytes_mut(&mut self) -> &mut [u8] {
        // SAFETY: the mapping is ours for its whole length and the caller made it writable;
        // the borrow of self keeps it mapped for the slice's life.
        unsafe { core::slice::from_raw_parts_mut(self.base as *mut u8, self.len) }
    }
}

impl Drop for Region {
    fn drop(&mut self) {
        // SAFETY: our own mapping, unmapped once.
        unsafe { libc::munmap(self.base as *mut _, self.len) };
    }
}
