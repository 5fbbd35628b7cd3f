//! A received segment's data as the TCP engine sees it: one slice, or the payloads of several
//! GRO-merged segments in order, still in their frames (`offload/gro.rs`), so that merging
//! costs no copy: the bytes are copied once, from the frames into the receive ring.

/// Bytes `start..end` of the concatenation of `parts`.
#[derive(Debug, Clone, Copy)]
pub struct Payload<'a> {
    parts: &'a [&'a [u8]],
    start: usize,
    end: usize,
}

impl<'a> Payload<'a> {
    /// The concatenation of `parts`.
    pub fn new(parts: &'a [&'a [u8]]) -> Self {
        let end = parts.iter().map(|p| p.len()).sum();
        Payload {
            parts,
            start: 0,
            end,
        }
    }

    pub fn len(&self) -> usize {
        self.end - self.start
    }

    pub fn is_empty(&self) -> bool {
        self.end == self.start
    }

    /// Bytes `from..to` of this payload (clamped to its length).
    pub fn slice(self, from: usize, to: usize) -> Self {
        let to = to.min(self.len());
        let from = from.min(to);
        Payload {
            parts: self.parts,
            start: self.start + from,
            end: self.start + to,
        }
    }

    /// Copies the bytes into `dst` (which must be exactly `len()` long; shorter copies less).
    pub fn copy_to(&self, dst: &mut [u8]) {
        self.copy_with(crate::mem::CopyMode::Kernels, dst)
    }

    /// [`Payload::copy_to`] with the stack's copy path (`mode`).
    pub fn copy_with(&self, mode: crate::mem::CopyMode, dst: &mut [u8]) {
        let mut skip = self.start;
        let mut at = 0;
        let want = self.len().min(dst.len());
        for p in self.parts {
            if at == want {
                break;
            }
            if skip >= p.len() {
                skip -= p.len();
                continue;
            }
            let n = (p.len() - skip).min(want - at);
            mode.copy(&mut dst[at..at + n], &p[skip..skip + n]);
            at += n;
            skip = 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slices_and_copies_across_parts() {
        let parts: [&[u8]; 3] = [b"abc", b"", b"defgh"];
        let p = Payload::new(&parts);
        assert_eq!(p.len(), 8);
        for from in 0..=8 {
            for to in from..=9 {
                let s = p.slice(from, to);
                let mut out = vec![0u8; s.len()];
                s.copy_to(&mut out);
                assert_eq!(&out[..], &b"abcdefgh"[from..to.min(8)]);
                // Slicing a slice is relative to it.
                let t = s.slice(1, 3);
                let mut o2 = vec![0u8; t.len()];
                t.copy_to(&mut o2);
                let base = &b"abcdefgh"[from..to.min(8)];
                assert_eq!(&o2[..], &base[1.min(base.len())..3.min(base.len())]);
            }
        }
    }
}
