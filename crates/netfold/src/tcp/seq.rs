//! Sequence-number arithmetic modulo 2^32 (RFC 9293 §3.4): comparisons are only meaningful
//! between numbers less than 2^31 apart, which the window rules guarantee.

/// `a < b` in sequence space.
#[inline]
pub fn lt(a: u32, b: u32) -> bool {
    (a.wrapping_sub(b) as i32) < 0
}
/// `a <= b` in sequence space.
#[inline]
pub fn le(a: u32, b: u32) -> bool {
    (a.wrapping_sub(b) as i32) <= 0
}
/// `a > b` in sequence space.
#[inline]
pub fn gt(a: u32, b: u32) -> bool {
    lt(b, a)
}
/// `a >= b` in sequence space.
#[inline]
pub fn ge(a: u32, b: u32) -> bool {
    le(b, a)
}
/// The later of two sequence numbers.
#[inline]
pub fn max(a: u32, b: u32) -> u32 {
    if ge(a, b) {
        a
    } else {
        b
    }
}
/// The earlier of two sequence numbers.
#[inline]
pub fn min(a: u32, b: u32) -> u32 {
    if le(a, b) {
        a
    } else {
        b
    }
}
/// `b - a` as an unsigned distance, 0 if `b` is before `a`.
#[inline]
pub fn dist(a: u32, b: u32) -> u32 {
    if le(a, b) {
        b.wrapping_sub(a)
    } else {
        0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wraps_around() {
        assert!(lt(u32::MAX - 5, 3));
        assert!(gt(3, u32::MAX - 5));
        assert!(le(7, 7) && ge(7, 7));
        assert_eq!(dist(u32::MAX - 1, 2), 4);
        assert_eq!(dist(5, 2), 0);
        assert_eq!(max(u32::MAX, 1), 1);
        assert_eq!(min(u32::MAX, 1), u32::MAX);
    }
}
