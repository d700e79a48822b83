//! A classic-BPF interpreter for the tests: the opcodes seccomp accepts that our programs
//! and seccompiler's use, run over a synthetic `struct seccomp_data` (x86_64 layout). It
//! also checks the program is well formed: every jump forward and in bounds, every load
//! aligned and inside the data, every path ending in `ret`.

use seccompiler::sock_filter;

/// The action `program` returns for a call of `nr` under `arch` with `args`.
pub fn run(program: &[sock_filter], arch: u32, nr: i32, args: [u64; 6]) -> u32 {
    let mut data = Vec::with_capacity(64);
    data.extend_from_slice(&nr.to_le_bytes());
    data.extend_from_slice(&arch.to_le_bytes());
    data.extend_from_slice(&0x1234_5678u64.to_le_bytes());
    for arg in args {
        data.extend_from_slice(&arg.to_le_bytes());
    }
    let mut acc: u32 = 0;
    let mut pc = 0usize;
    loop {
        let i = &program[pc];
        let next = |off: usize| {
            let target = pc + 1 + off;
            assert!(target < program.len(), "jump out of bounds at {pc}");
            target
        };
        match i.code {
            0x20 => {
                let k = i.k as usize;
                assert!(
                    k.is_multiple_of(4) && k + 4 <= data.len(),
                    "bad load at {pc}"
                );
                acc = u32::from_le_bytes(data[k..k + 4].try_into().unwrap());
                pc = next(0);
            }
            0x54 => {
                acc &= i.k;
                pc = next(0);
            }
            0x05 => pc = next(i.k as usize),
            0x15 => pc = next(usize::from(if acc == i.k { i.jt } else { i.jf })),
            0x25 => pc = next(usize::from(if acc > i.k { i.jt } else { i.jf })),
            0x35 => pc = next(usize::from(if acc >= i.k { i.jt } else { i.jf })),
            0x45 => pc = next(usize::from(if acc & i.k != 0 { i.jt } else { i.jf })),
            0x06 => return i.k,
            other => panic!("unexpected opcode {other:#x} at {pc}"),
        }
    }
}
