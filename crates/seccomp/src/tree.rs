//! The dispatch on the syscall number: a binary search over ranges of numbers that share an
//! action, in classic BPF.
//!
//! Written by hand because seccompiler, the crate the deny-list was first compiled with,
//! emits one chain of compares per rule: every syscall not in the list walks the whole
//! chain (366 instructions for the deny-list alone). That costs twice. When a filter is
//! installed the kernel emulates it once per syscall number to cache the calls it always
//! allows (`seccomp_cache_prepare`, under a spinlock) and JIT-compiles it: about 250 µs for
//! the chain, on the path of every run. And every allowed call of the sandboxed command
//! runs the chain again. Here a call reaches its action after about log2(ranges) compares,
//! as in minijail's and libseccomp's tree layouts.
//!
//! Shape: the numbers are cut into ranges (consecutive numbers with the same constant
//! action become one range, numbers nobody listed take the default action); each inner node
//! is `jge first_number_of_the_upper_half`, the lower half follows it, the upper half
//! follows the lower one. A leaf is a `ret` or the call's own block (argument checks). The
//! search assumes the accumulator holds the syscall number, below `X32_SYSCALL_BIT` (the
//! guard before it kills everything else).

use std::collections::BTreeMap;

use seccompiler::sock_filter;

use crate::{jump, stmt, SeccompError, BPF_JGE, BPF_JMP, BPF_K, BPF_RET};

/// `BPF_JA`: jump by `k`, unconditionally (classic BPF's `jt`/`jf` only reach 255 ahead).
const BPF_JA: u16 = 0x00;

/// What the program does for one syscall number.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Leaf {
    /// Return this seccomp action.
    Ret(u32),
    /// Run these instructions: every path through them ends in a `ret`, and their jumps stay
    /// inside them (they may load arguments; the number is not needed after).
    Block(Vec<sock_filter>),
}

/// A range of numbers, from `first` up to the next range's `first`.
struct Range<'a> {
    first: u32,
    leaf: &'a Leaf,
}

/// The search for `calls`; numbers not in it get `ret otherwise`.
pub(crate) fn search(
    calls: &BTreeMap<u32, Leaf>,
    otherwise: u32,
) -> Result<Vec<sock_filter>, SeccompError> {
    let default = Leaf::Ret(otherwise);
    let mut ranges: Vec<Range<'_>> = Vec::new();
    let mut next = 0u32; // the first number after the ranges so far
    for (&nr, leaf) in calls {
        if nr >= crate::X32_SYSCALL_BIT {
            return Err(SeccompError::BadNumber { nr: i64::from(nr) });
        }
        if nr > next {
            push(&mut ranges, next, &default);
        }
        push(&mut ranges, nr, leaf);
        next = nr + 1;
    }
    push(&mut ranges, next, &default);
    let program = emit(&ranges);
    if program.len() + crate::GUARD_LEN > crate::MAX_INSTRUCTIONS {
        return Err(SeccompError::TooLong {
            len: program.len() + crate::GUARD_LEN,
            max: crate::MAX_INSTRUCTIONS,
        });
    }
    Ok(program)
}

/// Add the range starting at `first`, or let the last one run on when it returns the same.
fn push<'a>(ranges: &mut Vec<Range<'a>>, first: u32, leaf: &'a Leaf) {
    let runs_on =
        matches!((ranges.last(), leaf), (Some(last), Leaf::Ret(k)) if *last.leaf == Leaf::Ret(*k));
    if !runs_on {
        ranges.push(Range { first, leaf });
    }
}

fn emit(ranges: &[Range<'_>]) -> Vec<sock_filter> {
    match ranges {
        [] => Vec::new(),
        [only] => match only.leaf {
            Leaf::Ret(k) => vec![stmt(BPF_RET | BPF_K, *k)],
            Leaf::Block(block) => block.clone(),
        },
        _ => {
            let mid = ranges.len() / 2;
            let (lower, upper) = (emit(&ranges[..mid]), emit(&ranges[mid..]));
            let split = ranges[mid].first;
            let mut out = Vec::with_capacity(lower.len() + upper.len() + 2);
            match u8::try_from(lower.len()) {
                Ok(skip) => out.push(jump(BPF_JMP | BPF_JGE | BPF_K, split, skip, 0)),
                Err(_) => {
                    // Too far for `jt`: fall into a long jump over the lower half.
                    out.push(jump(BPF_JMP | BPF_JGE | BPF_K, split, 0, 1));
                    out.push(stmt(BPF_JMP | BPF_JA, lower.len() as u32));
                }
            }
            out.extend(lower);
            out.extend(upper);
            out
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::interpret::run;

    const ALLOW: u32 = 0x7fff_0000;
    const DENY: u32 = 0x0005_0001;

    fn calls(list: &[(u32, Leaf)]) -> BTreeMap<u32, Leaf> {
        list.iter().cloned().collect()
    }

    /// The search's action for `nr`, loaded into the accumulator first as the guard does.
    fn at(p: &[sock_filter], nr: u32) -> u32 {
        let mut program = vec![stmt(crate::BPF_LD | crate::BPF_W | crate::BPF_ABS, 0)];
        program.extend_from_slice(p);
        run(&program, 0, nr as i32, [0; 6])
    }

    #[test]
    fn every_number_gets_its_action() {
        let list: Vec<(u32, Leaf)> = [0u32, 1, 2, 5, 7, 8, 9, 100, 101, 300, 1000]
            .iter()
            .map(|&n| (n, Leaf::Ret(DENY + n)))
            .collect();
        let p = search(&calls(&list), ALLOW).unwrap();
        for nr in 0..1100 {
            let want = list
                .iter()
                .find(|(n, _)| *n == nr)
                .map_or(ALLOW, |(n, _)| DENY + n);
            assert_eq!(at(&p, nr), want, "nr {nr}");
        }
        assert_eq!(at(&p, crate::X32_SYSCALL_BIT - 1), ALLOW);
    }

    #[test]
    fn equal_neighbours_share_a_range() {
        let list: Vec<(u32, Leaf)> = (10..60).map(|n| (n, Leaf::Ret(DENY))).collect();
        let p = search(&calls(&list), ALLOW).unwrap();
        // Three ranges (allow, deny, allow): two compares and three returns.
        assert_eq!(p.len(), 5);
        assert_eq!(at(&p, 9), ALLOW);
        assert_eq!(at(&p, 10), DENY);
        assert_eq!(at(&p, 59), DENY);
        assert_eq!(at(&p, 60), ALLOW);
    }

    #[test]
    fn nothing_listed_is_one_return() {
        let p = search(&BTreeMap::new(), ALLOW).unwrap();
        assert_eq!(p, vec![stmt(BPF_RET | BPF_K, ALLOW)]);
    }

    #[test]
    fn blocks_run_in_place_and_far_halves_use_a_long_jump() {
        // A block longer than a short jump can skip, in the lower half of the root.
        let mut long = vec![jump(BPF_JMP | BPF_JGE | BPF_K, 0, 0, 0); 300];
        long.push(stmt(BPF_RET | BPF_K, DENY));
        let list = vec![
            (3, Leaf::Block(long)),
            (4, Leaf::Ret(DENY + 4)),
            (9, Leaf::Ret(DENY + 9)),
        ];
        let p = search(&calls(&list), ALLOW).unwrap();
        assert!(p.iter().any(|i| i.code == BPF_JMP | BPF_JA));
        for nr in 0..20 {
            let want = match nr {
                3 => DENY,
                4 => DENY + 4,
                9 => DENY + 9,
                _ => ALLOW,
            };
            assert_eq!(at(&p, nr), want, "nr {nr}");
        }
    }

    #[test]
    fn numbers_with_the_x32_bit_are_refused() {
        let list = vec![(crate::X32_SYSCALL_BIT, Leaf::Ret(DENY))];
        assert!(matches!(
            search(&calls(&list), ALLOW),
            Err(SeccompError::BadNumber { .. })
        ));
    }
}
