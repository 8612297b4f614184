//! Finding the secret values in a credentials file.
//!
//! A value counts as a secret when its key names one (`…KEY`, `…TOKEN`, `PASSWORD`, a URL
//! with credentials, …) or when it looks random (long, mixing letters and digits). Files
//! without `KEY=value` lines (private keys, token files) contribute their long lines.

/// Words in a key name that mark its value as a secret.
const SECRET_KEY_WORDS: [&str; 11] = ["KEY", "SECRET", "TOKEN", "PASS", "PWD", "CREDENTIAL", "AUTH", "PRIVATE", "DSN", "DATABASE_URL", "COOKIE"];
/// Shortest value treated as a secret: shorter ones occur by chance.
const MIN_LEN: usize = 8;

fn looks_random(v: &str) -> bool {
    v.len() >= 16 && v.chars().any(|c| c.is_ascii_digit()) && v.chars().any(|c| c.is_ascii_alphabetic()) && !v.contains(' ')
}

/// The secret values in a file's text, longest first, without repeats.
pub fn extract(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut any_pairs = false;
    for line in text.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with('#')) {
        let line = line.strip_prefix("export ").unwrap_or(line);
        let pair = line.split_once('=').or_else(|| line.split_once(": "));
        if let Some((key, value)) = pair
            && !key.trim().is_empty()
            && !key.trim().contains(' ')
        {
            any_pairs = true;
            let key = key.trim().to_ascii_uppercase();
            let value = value.trim().trim_matches(['"', '\'']).trim();
            let named = SECRET_KEY_WORDS.iter().any(|w| key.contains(w)) || value.contains("://") && value.contains('@');
            if value.len() >= MIN_LEN && (named || looks_random(value)) {
                out.push(value.to_string());
            }
        }
    }
    if !any_pairs {
        out.extend(text.lines().map(str::trim).filter(|l| l.len() >= 16 && !l.starts_with("-----")).map(str::to_string));
    }
    out.sort_by(|a, b| b.len().cmp(&a.len()).then_with(|| a.cmp(b)));
    out.dedup();
    out
}
