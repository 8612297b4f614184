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
        // `KEY=value`, `key: value` or a JSON member, split at whichever separator comes first
        // (a value may hold `=`, as base64 does).
        let pair = match (line.find('='), line.find(": ")) {
            (Some(e), Some(c)) if c < e => line.split_once(": "),
            (Some(_), _) => line.split_once('='),
            (None, Some(_)) => line.split_once(": "),
            (None, None) => None,
        };
        if let Some((key, value)) = pair
            && !key.trim().trim_matches(['"', '\'']).is_empty()
            && !key.trim().contains(' ')
        {
            any_pairs = true;
            let key = key.trim().trim_matches(['"', '\'']).to_ascii_uppercase();
            // JSON and YAML values keep their quotes and a trailing comma.
            let value = value.trim().trim_end_matches(',').trim().trim_matches(['"', '\'']).trim();
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

#[cfg(test)]
mod tests {
    use super::extract;

    #[test]
    fn values_with_equals_signs_and_json_members_are_found_whole() {
        assert_eq!(extract("password: c2VjcmV0LXZhbHVl=="), vec!["c2VjcmV0LXZhbHVl==".to_string()]);
        assert_eq!(extract("API_KEY=abc=def=ghi123"), vec!["abc=def=ghi123".to_string()]);
        assert_eq!(extract("{\n  \"api_key\": \"sk-live-123456789\",\n  \"name\": \"demo\"\n}"), vec!["sk-live-123456789".to_string()]);
    }
}
