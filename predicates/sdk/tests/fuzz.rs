//! The shell reader and the reader table on generated command lines: pieces of the corpus,
//! shell operators, quotes, substitutions and keywords in random order, and random bytes.
//! Neither may panic; the work budget bounds each line. The test runs 20,000 lines; the
//! benchmark suite runs the ignored one-million-line version (`scripts/bench.sh`).

use overeager_predicate_sdk::reader::line_effects;

/// A small deterministic generator (xorshift64*), so a failure can be replayed from its seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

const PIECES: &[&str] = &[
    " ", " ", " ", "\n", ";", "&", "&&", "||", "|", "|&", "(", ")", "{", "}", "$(", "`", "'", "\"", "\\", "<", ">", ">>", "<<", "<<-", "<<<", ">&", "&>", "2>&1", "<(", ">(", "$((", "))", "${", "}", "$", "#", "=", "==",
    "if", "then", "else", "elif", "fi", "for", "in", "do", "done", "while", "until", "case", "esac", ";;", "function", "f()", "[[", "]]", "!", "time", "EOF", "'EOF'", "x=1", "cd", "cd -", "pushd", "popd", "eval", "sh -c",
    "bash -lc", "sudo", "env", "xargs", "find . -exec", "{}", "\\;", "+", "*", "?", "~", "~/.ssh/id_rsa", ".env", "$HOME", "$PWD", "$1", "$@", "-r", "-rf", "--", "-e", "-f", "-o", "-C", "-x", "--exclude=*.log", "a.txt",
    "dir/", "user@host:/p", "https://example.com/x", "@-", "@.env", "f=@a", "cat", "grep", "rg", "sed", "awk", "tar", "czf", "zip", "curl", "wget", "git", "push", "clone", "rsync", "scp", "ssh", "nc", "cp", "mv", "rm",
    "gzip", "jq", "python3 -m pip install", "npm i", "dd", "if=a", "of=b", "openssl", "-in", "-out", "gpg", "chmod", "+x", "ln -s", "find", "-name", "-maxdepth", "-type", "d", "ls -A", "-l",
    "-I{}", "-print0", "xargs -0",
];

fn corpus_lines() -> Vec<String> {
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/corpus.toml")).unwrap();
    let v: toml::Value = toml::from_str(&text).unwrap();
    v["program"].as_array().unwrap().iter().flat_map(|g| g["cases"].as_array().unwrap().iter().map(|c| c["line"].as_str().unwrap().to_string())).collect()
}

fn generate(rng: &mut Rng, corpus: &[String]) -> String {
    match rng.below(4) {
        // Pieces in random order.
        0 | 1 => (0..1 + rng.below(40)).map(|_| PIECES[rng.below(PIECES.len())]).collect(),
        // A corpus line cut and spliced with another.
        2 => {
            let a = &corpus[rng.below(corpus.len())];
            let b = &corpus[rng.below(corpus.len())];
            let cut_a = a.char_indices().map(|(i, _)| i).nth(rng.below(a.chars().count().max(1))).unwrap_or(0);
            let cut_b = b.char_indices().map(|(i, _)| i).nth(rng.below(b.chars().count().max(1))).unwrap_or(0);
            format!("{}{}{}", &a[..cut_a], PIECES[rng.below(PIECES.len())], &b[cut_b..])
        }
        // Random characters, with shell metacharacters over-represented.
        _ => {
            const META: &[u8] = b"|&;<>()$`'\"\\ \n{}#=*~";
            (0..rng.below(80)).map(|_| if rng.below(3) == 0 { META[rng.below(META.len())] as char } else { char::from_u32(rng.below(0x3000) as u32).unwrap_or('x') }).collect()
        }
    }
}

fn run(lines: usize, seed: u64) {
    let corpus = corpus_lines();
    let mut rng = Rng(seed);
    for i in 0..lines {
        let line = generate(&mut rng, &corpus);
        let result = std::panic::catch_unwind(|| line_effects(&line));
        assert!(result.is_ok(), "line {i} (seed {seed}) panicked: {line:?}");
    }
}

#[test]
fn generated_lines_never_panic() {
    run(20_000, 0x9e37_79b9_7f4a_7c15);
}

#[test]
#[ignore = "a million lines: run by the benchmark suite"]
fn a_million_generated_lines_never_panic() {
    run(1_000_000, 0x2545_f491_4f6c_dd1d);
}
