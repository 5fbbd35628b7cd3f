//! What the next ACK reports: the SACK blocks (RFC 2018 §4) and the D-SACK block (RFC 2883 §4).

use super::Receiver;
use crate::tcp::{dsack, seq};
use crate::wire::tcp::SackBlock;

/// The SACK report (RFC 2018 §4) and the D-SACK block (RFC 2883 §4) the next ACK carries;
/// the caller checks that SACK was negotiated.
impl Receiver {
    /// The next segment carries SACK blocks: out-of-order data is held, or a D-SACK block is
    /// pending.
    #[inline(always)]
    pub fn has_sack_report(&self) -> bool {
        !self.ring.asm.is_empty() || self.dsack.is_pending()
    }

    /// The SACK blocks of the next segment, at most `max`, the D-SACK block first (RFC 2883
    /// §4), then the remembered blocks while out-of-order data is held.
    pub fn sack_blocks(&self, max: usize) -> ([SackBlock; 4], usize) {
        let regular = if self.ring.asm.is_empty() {
            &[][..]
        } else {
            self.sack_hist.blocks()
        };
        self.dsack.compose(regular, max)
    }

    /// A segment carrying SACK blocks left (not a SYN): RFC 2883 §4, "each duplicate
    /// contiguous sequence of data received is reported in at most one D-SACK block".
    #[inline]
    pub fn on_sack_sent(&mut self) {
        self.dsack.on_ack_sent();
    }

    /// The data `[start, end)` of an arriving segment, before it is stored: the part already
    /// held (below RCV.NXT, or inside a queued out-of-order range) becomes the D-SACK block
    /// to report (`dsack::duplicate_block`). True if there was one.
    pub fn note_duplicate(&mut self, start: u32, end: u32) -> bool {
        let base = self.nxt;
        let held = self.ring.asm.ranges().iter().map(|&(o, l)| {
            let left = base.wrapping_add(o as u32);
            SackBlock {
                left,
                right: left.wrapping_add(l as u32),
            }
        });
        let dup = dsack::duplicate_block(start, end, base, held);
        self.dsack.record(dup);
        dup.is_some()
    }

    /// Remembered SACK blocks follow the assembler: merged ranges grow, ranges now in order
    /// disappear (RFC 2018 §4: report only data actually held above RCV.NXT). With none
    /// remembered (in-order traffic) there is nothing to refresh.
    #[inline]
    pub fn refresh_sack_report(&mut self) {
        if self.sack_hist.is_empty() {
            return;
        }
        let base = self.nxt;
        let asm = &self.ring.asm;
        self.sack_hist.refresh(base, |left| {
            asm.containing(seq::dist(base, left) as usize)
                .map(|(o, l)| {
                    let left = base.wrapping_add(o as u32);
                    SackBlock {
                        left,
                        right: left.wrapping_add(l as u32),
                    }
                })
        });
    }

    /// Out-of-order data was queued at `off` past RCV.NXT: the range now holding it is
    /// reported first (RFC 2018 §4: "the first SACK block ... MUST specify the contiguous
    /// block of data containing the segment which triggered this ACK").
    pub fn report_out_of_order(&mut self, off: usize) {
        if let Some((o, l)) = self.ring.asm.containing(off) {
            let left = self.nxt.wrapping_add(o as u32);
            self.sack_hist.record(SackBlock {
                left,
                right: left.wrapping_add(l as u32),
            });
        }
    }
}
