//! Loading never panics: a deterministic fuzz loop over mutations of the shipped workloads
//! (truncations, deletions, duplicated and swapped lines, inserted tokens, changed numbers,
//! flipped bytes) and a set of hostile inputs (empty, huge, deeply nested, non-ASCII, NUL).
use std::panic::{catch_unwind, AssertUnwindSafe};

use enginetop::workload::{load_str, Overrides, MAX_FILE_BYTES, SHIPPED};

/// SplitMix64, so every run mutates the same way.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

const TOKENS: &[&str] = &[
    "[",
    "]",
    "{",
    "}",
    "\"",
    "'",
    "=",
    ",",
    "\n",
    "${",
    "${i",
    "}}",
    "[[block]]\n",
    "[params]\n",
    "[[op]]\n",
    "[templates.t]\n",
    "repeat = 99999999999999999999\n",
    "-1",
    "0",
    "\"${1 / 0}\"",
    "\"${9223372036854775807 * 2}\"",
    "ä€😀",
    "\u{0}",
    "\u{feff}",
    "9223372036854775807",
    "\"${i}\"",
    "\"${rand(5, 1)}\"",
    "use = \"stage\"\n",
    "when = \"1\"\n",
    "phase = \"setup\"\n",
    "reads = [{ repeat = 3, name = \"x${j}\" }]",
    "shape = []",
    "shape = [0]",
    "\"gpu:1\"",
    "property = \"copy_to_gpu\"\n",
    "kernel = \"gemm\"\n",
    "\"${((((((1))))))}\"",
    "#",
    "\t",
];

fn char_boundary(text: &str, mut at: usize) -> usize {
    at = at.min(text.len());
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    at
}

/// The shipped files with long loops shortened (every number of 4+ digits becomes 12), so a
/// mutation that keeps them valid still loads in microseconds.
fn shrunk(source: &str) -> String {
    let mut out = String::with_capacity(source.len());
    let mut digits = String::new();
    for c in source.chars().chain(std::iter::once(' ')) {
        if c.is_ascii_digit() {
            digits.push(c);
            continue;
        }
        out.push_str(if digits.len() >= 4 { "12" } else { &digits });
        digits.clear();
        out.push(c);
    }
    out.pop();
    out
}

fn mutate(text: &str, rng: &mut Rng) -> String {
    let len = text.len();
    let at = char_boundary(text, rng.below(len + 1));
    let lines: Vec<&str> = text.lines().collect();
    match rng.below(7) {
        0 => text[..at].to_string(),
        1 => {
            let end = char_boundary(text, at + rng.below(200));
            format!("{}{}", &text[..at], &text[end.max(at)..])
        }
        2 => {
            let line = rng.below(lines.len());
            let mut copy = lines.clone();
            copy.insert(line, lines.get(line).copied().unwrap_or(""));
            copy.join("\n")
        }
        3 => {
            let (a, b) = (rng.below(lines.len()), rng.below(lines.len()));
            let mut copy = lines.clone();
            if a < copy.len() && b < copy.len() {
                copy.swap(a, b);
            }
            copy.join("\n")
        }
        4 => format!(
            "{}{}{}",
            &text[..at],
            TOKENS[rng.below(TOKENS.len())],
            &text[at..]
        ),
        5 => {
            let numbers = [
                "0",
                "-1",
                "1",
                "7",
                "99999999999",
                "3000000000",
                "\"x\"",
                "2.5",
            ];
            let start = text[at..]
                .find(|c: char| c.is_ascii_digit())
                .map(|i| at + i);
            match start {
                Some(start) => {
                    let end = text[start..]
                        .find(|c: char| !c.is_ascii_digit())
                        .map_or(len, |i| start + i);
                    format!(
                        "{}{}{}",
                        &text[..start],
                        numbers[rng.below(numbers.len())],
                        &text[end..]
                    )
                }
                None => text.to_string(),
            }
        }
        _ => {
            let mut bytes = text.as_bytes().to_vec();
            if !bytes.is_empty() {
                let index = rng.below(bytes.len());
                let alphabet = b" !\"#$%&'()*+,-./0123456789:;<=>?@[]{}_az\n";
                bytes[index] = alphabet[rng.below(alphabet.len())];
            }
            String::from_utf8_lossy(&bytes).into_owned()
        }
    }
}

/// Loads `text`; fails the test if loading panics or reports a place outside the text.
fn load_must_not_panic(text: &str, what: &str) {
    let result = catch_unwind(AssertUnwindSafe(|| {
        load_str(text, "fuzz.toml", &Overrides::default())
    }));
    let Ok(loaded) = result else {
        panic!("loading panicked on {what}:\n{text}");
    };
    if let Err(err) = loaded {
        if let Some(position) = err.position {
            let lines = text.split('\n').count();
            assert!(
                position.line <= lines,
                "{what}: {err} (text has {lines} lines)"
            );
        }
        assert!(!err.to_string().is_empty());
    }
}

#[test]
fn mutated_shipped_workloads_never_panic() {
    let mut rng = Rng(0x5EED);
    for workload in SHIPPED {
        let base = shrunk(workload.source);
        assert!(
            load_str(&base, "base.toml", &Overrides::default()).is_ok(),
            "{}",
            workload.name
        );
        for round in 0..120 {
            let mut text = base.clone();
            for _ in 0..=rng.below(3) {
                text = mutate(&text, &mut rng);
            }
            load_must_not_panic(&text, &format!("{} round {round}", workload.name));
        }
    }
}

#[test]
fn hostile_inputs_are_errors_not_panics() {
    let deep_arrays = format!(
        "description = \"x\"\nx = {}{}",
        "[".repeat(100_000),
        "]".repeat(100_000)
    );
    let deep_tables = format!(
        "description = \"x\"\nx = {}1{}",
        "{a=".repeat(50_000),
        "}".repeat(50_000)
    );
    let deep_expression = format!(
        "description = \"x\"\n[[tensor]]\nname = \"x\"\nshape = [\"{}1{}\"]",
        "(".repeat(50_000),
        ")".repeat(50_000)
    );
    let long_name = format!(
        "description = \"x\"\n[[tensor]]\nname = \"{}\"\nshape = [1]",
        "n".repeat(100_000)
    );
    let inputs = [
        String::new(),
        "   \n\t\n".to_string(),
        "\u{feff}description = \"bom\"".to_string(),
        "description = \"x\"\0".to_string(),
        "😀😀😀 = \"ünïcödé\"".to_string(),
        "a".repeat(MAX_FILE_BYTES + 1),
        deep_arrays,
        deep_tables,
        deep_expression,
        long_name,
        "description = \"x\"\n[[block]]\nrepeat = 2000000\n[[block.block]]\nrepeat = 2000000".to_string(),
        "description = \"x\"\n[templates.a]\n[[templates.a.block]]\nuse = \"b\"\n[templates.b]\n[[templates.b.block]]\nuse = \"a\"\n[[block]]\nuse = \"a\"".to_string(),
        "description = \"x\"\n[[tensor]]\nname = \"x\"\nshape = [4294967296, 4294967296]".to_string(),
        "description = \"x\"\n[[tensor]]\nname = \"x\"\nshape = [1,1,1,1,1,1,1,1,1,1]".to_string(),
    ];
    for (index, input) in inputs.iter().enumerate() {
        load_must_not_panic(input, &format!("hostile input {index}"));
        assert!(
            load_str(input, "x.toml", &Overrides::default()).is_err(),
            "input {index} loaded"
        );
    }
}

#[test]
fn random_bytes_never_panic() {
    let mut rng = Rng(7);
    for round in 0..500 {
        let len = rng.below(300);
        let bytes: Vec<u8> = (0..len).map(|_| rng.next() as u8).collect();
        load_must_not_panic(
            &String::from_utf8_lossy(&bytes),
            &format!("random bytes {round}"),
        );
    }
}
