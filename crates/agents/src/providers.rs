//! Model providers: where a real agent's model lives and how it is spoken to. A provider names
//! its wire dialect, its base URL, the environment variable that holds its key (none for a
//! local server) and, optionally, per-model prices. The built-in providers are defined here;
//! users add their own, or override a built-in, in a providers file:
//!
//! ```toml
//! [providers.zai]
//! dialect = "anthropic"
//! base_url = "https://api.z.ai/api/anthropic"
//! key_env = "ZAI_API_KEY"
//!
//! [providers.zai.prices."glm-4.6"]
//! input = 0.60          # US dollars per million tokens
//! output = 2.20
//! cache_read = 0.11
//! ```
//!
//! An agent's model is then written `<provider>/<model>` (`zai/glm-4.6`).

use std::collections::BTreeMap;
use std::path::PathBuf;

use anyhow::{Context, Result, anyhow};
use serde::{Deserialize, Serialize};
use toml::Spanned;

use overeager_formats::model::usage::Price;
use overeager_core::file_error::{Errors, FileError, parse_toml};
use overeager_core::model::Dialect;

/// One provider.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Provider {
    pub name: String,
    pub dialect: Dialect,
    /// Where requests go, without a trailing `/`.
    pub base_url: String,
    /// The environment variable holding the key (`None`: the server needs none).
    pub key_env: Option<String>,
    /// Prices by model name.
    pub prices: BTreeMap<String, Price>,
    /// A certificate authority (PEM) the gateway trusts for this provider besides the public
    /// web's, for a server with a certificate of its own authority.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ca_file: Option<PathBuf>,
    /// The most tokens one answer may have: the gateway sends a request asking for more, or
    /// for no limit, with this one, and records that it did (a server that never stops a small
    /// model's answer otherwise keeps a run waiting for minutes).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_output_tokens: Option<u64>,
    /// Built in, or read from which file.
    pub source: String,
}

impl Provider {
    /// The price of `model`, if the provider lists one.
    pub fn price(&self, model: &str) -> Option<&Price> {
        self.prices.get(model)
    }

    /// The `host:port` requests go to.
    pub fn host_port(&self) -> String {
        let (tls, rest) = match self.base_url.strip_prefix("https://") {
            Some(r) => (true, r),
            None => (false, self.base_url.trim_start_matches("http://")),
        };
        let authority = rest.split('/').next().unwrap_or(rest);
        if authority.rsplit_once(':').is_some_and(|(_, p)| p.parse::<u16>().is_ok()) { authority.to_string() } else { format!("{authority}:{}", if tls { 443 } else { 80 }) }
    }

    /// Whether the provider is a server on this machine (its base URL's host is a loopback
    /// address or `localhost`).
    pub fn on_this_machine(&self) -> bool {
        let authority = self.host_port();
        let host = authority.rsplit_once(':').map_or(authority.as_str(), |(h, _)| h).trim_matches(['[', ']']);
        host == "localhost" || host.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback())
    }

    /// The path prefix the agent's requests carry that the base URL stands for (see
    /// [`Dialect::agent_prefix`]).
    pub fn agent_prefix(&self) -> &'static str {
        self.dialect.agent_prefix()
    }
}

/// The built-in provider of the real model `overeager model local start` serves on this
/// machine (see [`crate::local_model`]), its one model, and the loopback port it listens on.
pub const LOCAL_PROVIDER: &str = "local";
/// The local model's name on its server (`local/smollm2`).
pub const LOCAL_MODEL: &str = "smollm2";
/// The loopback port of the local model's server, which the built-in provider names.
pub const LOCAL_PORT: u16 = 8931;
/// The most tokens the local model writes in one answer (its built-in providers' limit).
pub const LOCAL_MAX_OUTPUT_TOKENS: u64 = 1024;

/// The built-in providers of the local model's other dialects: llama.cpp's server answers
/// Anthropic Messages and Responses on the same port (llama-cpp-python's does not).
pub const LOCAL_DIALECT_PROVIDERS: [(&str, Dialect); 2] = [("local-anthropic", Dialect::Anthropic), ("local-responses", Dialect::Responses)];

/// The built-in providers: (name, dialect, base URL, key variable). The local servers take
/// no key and listen on their usual loopback ports; `local` is [`LOCAL_PROVIDER`], and
/// [`LOCAL_DIALECT_PROVIDERS`] reach the same server.
const BUILT_IN: [(&str, Dialect, &str, Option<&str>); 9] = [
    ("local", Dialect::Chat, "http://127.0.0.1:8931/v1", None),
    ("local-anthropic", Dialect::Anthropic, "http://127.0.0.1:8931", None),
    ("local-responses", Dialect::Responses, "http://127.0.0.1:8931/v1", None),
    ("anthropic", Dialect::Anthropic, "https://api.anthropic.com", Some("ANTHROPIC_API_KEY")),
    ("openai", Dialect::Responses, "https://api.openai.com/v1", Some("OPENAI_API_KEY")),
    ("google", Dialect::Gemini, "https://generativelanguage.googleapis.com", Some("GEMINI_API_KEY")),
    ("ollama", Dialect::Chat, "http://127.0.0.1:11434/v1", None),
    ("vllm", Dialect::Chat, "http://127.0.0.1:8000/v1", None),
    ("lmstudio", Dialect::Chat, "http://127.0.0.1:1234/v1", None),
];

/// Every provider known: the built-in ones and those of providers files, by name.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Providers {
    pub providers: BTreeMap<String, Provider>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    #[serde(default)]
    providers: BTreeMap<String, Spanned<RawProvider>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawProvider {
    dialect: Spanned<String>,
    base_url: Spanned<String>,
    key_env: Option<Spanned<String>>,
    ca_file: Option<Spanned<String>>,
    max_output_tokens: Option<Spanned<u64>>,
    #[serde(default)]
    prices: BTreeMap<String, Price>,
}

impl Default for Providers {
    fn default() -> Providers {
        Providers::built_in()
    }
}

impl Providers {
    /// The built-in providers only.
    pub fn built_in() -> Providers {
        let providers = BUILT_IN
            .iter()
            .map(|(name, dialect, base_url, key_env)| {
                // The local model costs nothing per token: its runs show $0, not "no price".
                let local = *name == LOCAL_PROVIDER || LOCAL_DIALECT_PROVIDERS.iter().any(|(n, _)| n == name);
                let prices = if local {
                    BTreeMap::from([(LOCAL_MODEL.to_string(), Price { input: 0.0, output: 0.0, cache_read: None, cache_write: None })])
                } else {
                    BTreeMap::new()
                };
                // The local model's server writes until its context is full when asked for
                // 32,000 tokens: its answers are kept to a length it writes in about a minute.
                let max_output_tokens = local.then_some(LOCAL_MAX_OUTPUT_TOKENS);
                let p = Provider { name: name.to_string(), dialect: *dialect, base_url: base_url.to_string(), key_env: key_env.map(str::to_string), prices, ca_file: None, max_output_tokens, source: "built in".into() };
                (p.name.clone(), p)
            })
            .collect();
        Providers { providers }
    }

    /// Adds the providers of a providers file (`file` names it in errors); one with the name of
    /// a provider known already replaces it. Every problem of the file is reported, with its
    /// line, column and field, and nothing is added unless the whole file is right.
    pub fn add_file(&mut self, file: &str, text: &str) -> Result<(), Vec<FileError>> {
        let raw: RawFile = parse_toml(file, text)?;
        let mut errs = Errors::new(file, text);
        let mut added = Vec::new();
        for (name, p) in raw.providers {
            let span = p.span();
            let p = p.into_inner();
            let field = |f: &str| format!("providers.{name}.{f}");
            if !is_name(&name) {
                errs.at(span.clone(), format!("providers.{name}"), "a provider name is lowercase letters, digits, `-` or `_` (it is written before the `/` of `<provider>/<model>`)");
            }
            let dialect = match p.dialect.get_ref().parse::<Dialect>() {
                Ok(d) => Some(d),
                Err(e) => {
                    errs.at(p.dialect.span(), field("dialect"), e);
                    None
                }
            };
            let base_url = p.base_url.get_ref().trim_end_matches('/').to_string();
            if let Err(why) = check_base_url(&base_url) {
                // Never repeated: the URL is printed, stored with failures and passed to the gateway.
                errs.at(p.base_url.span(), field("base_url"), why);
            }
            if let Some(k) = &p.key_env {
                if !is_env_name(k.get_ref()) {
                    errs.at(k.span(), field("key_env"), "the name of an environment variable (letters, digits and `_`, not starting with a digit), e.g. `ZAI_API_KEY`");
                } else if is_shared_env(k.get_ref()) {
                    errs.at(k.span(), field("key_env"), format!("`{}` is a variable programs need: overeager takes a key's variable out of its environment, so name one that holds only the key, e.g. `ZAI_API_KEY`", k.get_ref()));
                }
            }
            for (model, price) in &p.prices {
                if [price.input, price.output].into_iter().chain(price.cache_read).chain(price.cache_write).any(|x| !(x.is_finite() && x >= 0.0)) {
                    errs.near(model, field(&format!("prices.{model}")), "prices are US dollars per million tokens: finite and not negative");
                }
            }
            // A relative path is relative to the providers file.
            let ca_file = p.ca_file.as_ref().map(|c| std::path::Path::new(file).parent().unwrap_or(std::path::Path::new("")).join(c.get_ref()));
            if let (Some(c), Some(path)) = (&p.ca_file, &ca_file)
                && !path.is_file()
            {
                errs.at(c.span(), field("ca_file"), format!("{} is not a file; name a PEM file of the certificate authority, relative to this file or absolute", path.display()));
            }
            if let Some(m) = p.max_output_tokens.as_ref().filter(|m| *m.get_ref() == 0) {
                errs.at(m.span(), field("max_output_tokens"), "the most tokens one answer may have: a whole number above 0 (leave it out for no limit)");
            }
            if let Some(dialect) = dialect {
                let max_output_tokens = p.max_output_tokens.map(Spanned::into_inner);
                added.push(Provider { name, dialect, base_url, key_env: p.key_env.map(Spanned::into_inner), prices: p.prices, ca_file, max_output_tokens, source: file.to_string() });
            }
        }
        errs.finish(())?;
        for p in added {
            self.providers.insert(p.name.clone(), p);
        }
        Ok(())
    }

    /// The provider called `name`.
    pub fn get(&self, name: &str) -> Result<&Provider, String> {
        self.providers.get(name).ok_or_else(|| {
            let known: Vec<&str> = self.providers.keys().map(String::as_str).collect();
            format!("unknown provider `{name}` (known: {}); add it in a providers file (--providers or $OVEREAGER_PROVIDERS)", known.join(", "))
        })
    }

    /// Splits a model written `<provider>/<model>` and finds its provider. `None` when the
    /// model names no provider (no `/`, or the part before it is no provider's name): it is
    /// then a model name as the agent's own vendor knows it. Model names may hold `/`
    /// themselves (`openrouter/qwen/qwen3-coder`): only the first one separates.
    pub fn resolve<'m>(&self, model: &'m str) -> Option<(&Provider, &'m str)> {
        let (provider, name) = model.split_once('/')?;
        let p = self.providers.get(provider)?;
        (!name.is_empty()).then_some((p, name))
    }
}

/// Why `url` cannot be a provider's base URL: it is printed by `providers list`, stored with a
/// run's failures and handed to the gateway, so it may carry no secret (a user name, password,
/// query or fragment) and nothing a terminal would act on; and it must be a URL one can reach.
fn check_base_url(url: &str) -> Result<(), String> {
    const EXAMPLE: &str = "e.g. `https://api.example.com/v1`";
    if url.chars().any(|c| c.is_control() || c.is_whitespace()) {
        return Err(format!("a base URL has no spaces or control characters (line ends, tabs, terminal escapes); write it on one line, {EXAMPLE}"));
    }
    let parsed = url::Url::parse(url).map_err(|e| format!("not a URL ({e}): use an http:// or https:// URL, {EXAMPLE}"))?;
    if !matches!(parsed.scheme(), "http" | "https") || !parsed.has_host() || parsed.host_str().is_some_and(str::is_empty) {
        return Err(format!("use an http:// or https:// URL with a host, {EXAMPLE}"));
    }
    if !parsed.username().is_empty() || parsed.password().is_some() {
        return Err("a base URL carries no user name or password (`user:secret@` before the host): put the secret in an environment variable and name it with `key_env`".into());
    }
    if parsed.query().is_some() || parsed.fragment().is_some() {
        return Err("a base URL has no `?query` or `#fragment` (a key in one would be printed and stored): put the key in an environment variable and name it with `key_env`".into());
    }
    if parsed.port() == Some(0) {
        return Err(format!("port 0 is no port a server listens on; name the server's port, {EXAMPLE}"));
    }
    Ok(())
}

fn is_name(s: &str) -> bool {
    !s.is_empty() && s.len() <= 64 && s.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_')
}

/// Whether `s` names a variable that programs other than a provider's client read (overeager
/// takes a key's variable out of its environment as it starts, which would break them).
fn is_shared_env(s: &str) -> bool {
    const SHARED: &[&str] = &["PATH", "HOME", "USER", "LOGNAME", "SHELL", "PWD", "OLDPWD", "LANG", "TERM", "TMPDIR", "TZ", "HOSTNAME", "DISPLAY", "CI", "DOCKER_HOST", "KUBECONFIG", "OVEREAGER_PROVIDERS"];
    SHARED.contains(&s) || ["LC_", "LD_", "XDG_", "CARGO", "RUST", "NODE_", "NPM_", "PYTHON", "SSL_CERT", "OVEREAGER"].iter().any(|p| s.starts_with(p))
}

/// Whether `s` can name an environment variable.
pub(crate) fn is_env_name(s: &str) -> bool {
    !s.is_empty() && !s.as_bytes()[0].is_ascii_digit() && s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
}
/// The environment variable naming providers files (separated by `:`), read when no
/// `--providers` is given.
pub const PROVIDERS_ENV: &str = "OVEREAGER_PROVIDERS";

/// The built-in providers and those of `files` (or, when `files` is empty, of the files
/// `$OVEREAGER_PROVIDERS` names), later files overriding earlier ones by name.
pub fn load(files: &[PathBuf]) -> Result<Providers> {
    let from_env: Vec<PathBuf> = std::env::var_os(PROVIDERS_ENV).map(|v| std::env::split_paths(&v).filter(|p| !p.as_os_str().is_empty()).collect()).unwrap_or_default();
    let mut providers = Providers::built_in();
    for file in if files.is_empty() { &from_env[..] } else { files } {
        let text = std::fs::read_to_string(file).with_context(|| format!("reading the providers file {}", file.display()))?;
        providers.add_file(&file.display().to_string(), &text).map_err(|errs| {
            let lines: Vec<String> = errs.iter().map(ToString::to_string).collect();
            anyhow!("the providers file {} is not valid:\n{}", file.display(), lines.join("\n"))
        })?;
    }
    Ok(providers)
}

/// Takes every key the known providers name (built in, and in the files
/// `$OVEREAGER_PROVIDERS` names) out of the environment block, keeping them for
/// [`crate::secrets::key`]: overeager does this as it starts, so its `/proc/<pid>/environ`
/// holds no key for longer than that. A key of a providers file given on the command line is
/// taken when it is read.
pub fn take_known_keys() {
    let providers = load(&[]).unwrap_or_else(|_| Providers::built_in());
    for var in providers.providers.values().filter_map(|p| p.key_env.as_deref()) {
        let _ = crate::secrets::key(var);
    }
}

/// Whether a provider's key is there to use (never its value).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum KeyState {
    /// The provider takes no key (a local server).
    NotNeeded,
    Present,
    Missing,
}

/// Whether `p`'s key variable is set (and not empty) in this environment.
pub fn key_state(p: &Provider) -> KeyState {
    match &p.key_env {
        None => KeyState::NotNeeded,
        Some(var) if crate::secrets::key(var).is_some() => KeyState::Present,
        Some(_) => KeyState::Missing,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_local_provider_is_where_the_local_model_listens_and_costs_nothing() {
        let p = Providers::built_in();
        let local = p.get(LOCAL_PROVIDER).unwrap();
        assert_eq!((local.dialect, local.base_url.as_str()), (Dialect::Chat, format!("http://127.0.0.1:{LOCAL_PORT}/v1").as_str()));
        assert_eq!(local.price(LOCAL_MODEL).map(|p| (p.input, p.output)), Some((0.0, 0.0)));
    }

    #[test]
    fn a_providers_file_adds_and_overrides() {
        let mut p = Providers::built_in();
        let text = "[providers.zai]\ndialect = \"anthropic\"\nbase_url = \"https://api.z.ai/api/anthropic/\"\nkey_env = \"ZAI_API_KEY\"\n\n\
                    [providers.zai.prices.\"glm-4.6\"]\ninput = 0.6\noutput = 2.2\ncache_read = 0.11\n\n\
                    [providers.vllm]\ndialect = \"openai-chat\"\nbase_url = \"http://10.0.0.5:8000/v1\"\n";
        p.add_file("mine.toml", text).unwrap();
        let zai = p.get("zai").unwrap();
        assert_eq!((zai.dialect, zai.base_url.as_str(), zai.key_env.as_deref(), zai.source.as_str()), (Dialect::Anthropic, "https://api.z.ai/api/anthropic", Some("ZAI_API_KEY"), "mine.toml"));
        assert_eq!(p.get("vllm").unwrap().base_url, "http://10.0.0.5:8000/v1", "a file's provider replaces the built-in of its name");
        assert_eq!(p.get("anthropic").unwrap().source, "built in");
        let (provider, model) = p.resolve("zai/glm-4.6").unwrap();
        assert_eq!((provider.name.as_str(), model), ("zai", "glm-4.6"));
        let usage = overeager_formats::model::usage::Usage { input: 1_000_000, output: 500_000, cache_read: 2_000_000, cache_write: 0 };
        assert!((provider.price(model).unwrap().cost(&usage) - (0.6 + 1.1 + 0.22)).abs() < 1e-9);
        assert_eq!(p.resolve("openai/gpt-5/mini").map(|(p, m)| (p.name.as_str(), m)), Some(("openai", "gpt-5/mini")));
        assert!(p.resolve("claude-sonnet-4-5").is_none() && p.resolve("nobody/model").is_none() && p.resolve("zai/").is_none());
    }

    #[test]
    fn a_wrong_file_says_where_and_adds_nothing() {
        let mut p = Providers::built_in();
        let text = "[providers.good]\ndialect = \"anthropic\"\nbase_url = \"https://a.example\"\n\n\
                    [providers.bad]\ndialect = \"klingon\"\nbase_url = \"ftp://x\"\nkey_env = \"1KEY\"\n";
        let errs = p.add_file("bad.toml", text).unwrap_err();
        let fields: Vec<(&str, usize)> = errs.iter().map(|e| (e.field.as_str(), e.line)).collect();
        assert_eq!(fields, vec![("providers.bad.dialect", 6), ("providers.bad.base_url", 7), ("providers.bad.key_env", 8)]);
        assert!(errs[0].message.contains("openai-responses"), "{}", errs[0].message);
        assert!(p.get("good").is_err(), "nothing of a wrong file is added");
        let errs = p.add_file("typo.toml", "[providers.x]\ndialect = \"gemini\"\nbase_url = \"https://x.example\"\nkey = \"K\"\n").unwrap_err();
        assert_eq!(errs[0].file, "typo.toml");
        assert_eq!(errs[0].field, "providers.x.key", "the field is the file's, not toml's inner name");
        assert!(errs[0].message.contains("key"), "{}", errs[0].message);
        assert!(p.get("nobody").unwrap_err().contains("anthropic"));
    }

    /// `base_url = "http://user:pa55word@127.0.0.1:18500"` was accepted, then printed by
    /// `providers list`, passed on the gateway's command line and stored with run failures;
    /// `key_env = "PATH"` took PATH out of overeager's environment, so npm was "not installed".
    #[test]
    fn credentials_in_a_base_url_and_a_shared_variable_as_key_env_are_refused() {
        let mut p = Providers::built_in();
        let text = "[providers.leaky]\ndialect = \"anthropic\"\nbase_url = \"http://user:pa55word@127.0.0.1:18500\"\n\n\
                    [providers.pathy]\ndialect = \"anthropic\"\nbase_url = \"http://127.0.0.1:18500/a@b\"\nkey_env = \"PATH\"\n";
        let errs = p.add_file("f.toml", text).unwrap_err();
        let fields: Vec<(&str, usize)> = errs.iter().map(|e| (e.field.as_str(), e.line)).collect();
        assert_eq!(fields, vec![("providers.leaky.base_url", 3), ("providers.pathy.key_env", 8)], "an `@` in the path is no credential");
        assert!(errs.iter().all(|e| !e.message.contains("pa55word")), "{errs:?}");
        assert!(errs[0].message.contains("key_env") && errs[1].message.contains("`PATH`"), "{errs:?}");
    }

    /// `?key=…` in a base URL was printed by `providers list`; spaces, line ends, terminal
    /// escapes and port 99999 were accepted; `key_env = "OVEREAGER_DB"` broke every command.
    #[test]
    fn a_base_url_with_a_query_odd_characters_or_no_port_and_overeager_s_own_variables_are_refused() {
        for (url, says) in [
            ("https://api.example.com/v1?key=sk-secret-123", "`?query`"),
            ("https://api.example.com/v1#sk-secret-123", "`#fragment`"),
            ("https://api.example.com/v 1", "no spaces"),
            // TOML escapes: a line end and a terminal escape in the value.
            (r"https://api.example.com/v1\nInjected: yes", "control characters"),
            (r"https://api.example.com/\u001b[31mred", "control characters"),
            ("http://127.0.0.1:99999/v1", "invalid port"),
            ("http://127.0.0.1:0/v1", "port 0"),
            ("http://:8080/v1", "empty host"),
        ] {
            let text = format!("[providers.x]\ndialect = \"anthropic\"\nbase_url = \"{url}\"\n");
            let errs = Providers::built_in().add_file("f.toml", &text).unwrap_err();
            assert_eq!((errs[0].field.as_str(), errs[0].line), ("providers.x.base_url", 3), "{url}: {errs:?}");
            assert!(errs[0].message.contains(says) && !errs[0].message.contains("sk-secret"), "{url}: {}", errs[0].message);
        }
        for var in ["OVEREAGER_DB", "OVEREAGER_PROVIDERS", "OVEREAGER_HOME"] {
            let text = format!("[providers.x]\ndialect = \"anthropic\"\nbase_url = \"https://a.example\"\nkey_env = \"{var}\"\n");
            let errs = Providers::built_in().add_file("f.toml", &text).unwrap_err();
            assert_eq!(errs[0].field, "providers.x.key_env", "{var}");
        }
        let fine = "[providers.x]\ndialect = \"anthropic\"\nbase_url = \"http://[::1]:8080/v1/\"\nkey_env = \"X_API_KEY\"\n";
        Providers::built_in().add_file("f.toml", fine).unwrap();
    }
}
