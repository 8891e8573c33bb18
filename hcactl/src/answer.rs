//! Reading an IOCTL answer that came from elsewhere (a server, a driver) field by field:
//! anything short or out of range is an error naming the request, never an index out of
//! bounds.

/// An answer that is too short or does not make sense.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct BadAnswer(String);

/// The output bytes of one request, named for the errors.
#[derive(Debug, Clone, Copy)]
pub struct Answer<'a> {
    what: &'static str,
    bytes: &'a [u8],
}

impl<'a> Answer<'a> {
    /// `what` names the request ("LIST_CLIENTS").
    pub fn new(what: &'static str, bytes: &'a [u8]) -> Self {
        Answer { what, bytes }
    }

    fn short(&self, need: usize) -> BadAnswer {
        BadAnswer(format!(
            "a short {} answer from the server ({} bytes, {need} needed)",
            self.what,
            self.bytes.len()
        ))
    }

    pub fn slice(&self, at: usize, len: usize) -> Result<&'a [u8], BadAnswer> {
        let end = at.checked_add(len).ok_or_else(|| self.short(usize::MAX))?;
        self.bytes.get(at..end).ok_or_else(|| self.short(end))
    }

    pub fn u32(&self, at: usize) -> Result<u32, BadAnswer> {
        let b = self.slice(at, 4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    pub fn u64(&self, at: usize) -> Result<u64, BadAnswer> {
        let mut v = [0u8; 8];
        v.copy_from_slice(self.slice(at, 8)?);
        Ok(u64::from_le_bytes(v))
    }

    /// An answer of the right length whose content makes no sense.
    pub fn malformed(&self, why: &str) -> BadAnswer {
        BadAnswer(format!(
            "a malformed {} answer from the server: {why}",
            self.what
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_answers_are_errors_that_name_the_request() {
        let bytes = [1u8, 0, 0, 0, 2, 0];
        let a = Answer::new("READ_LOG", &bytes);
        assert_eq!(a.u32(0), Ok(1));
        let e = a.u32(4).expect_err("2 bytes left");
        assert_eq!(
            e.to_string(),
            "a short READ_LOG answer from the server (6 bytes, 8 needed)"
        );
        assert!(a.u64(0).is_err());
        assert!(a.slice(usize::MAX, 2).is_err(), "no overflow");
        assert!(a.malformed("why").to_string().contains("READ_LOG"));
    }
}
