//! Headless Chromium through chromedriver (fantoccini), for the tests that look at pages.

use std::net::TcpListener;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use fantoccini::{Client, ClientBuilder, Locator};
use serde_json::{Value, json};

pub const WAIT: Duration = Duration::from_secs(20);

pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

pub struct Driver {
    child: Child,
    pub url: String,
}

impl Drop for Driver {
    fn drop(&mut self) {
        // chromedriver runs in a process group of its own, with the browsers it started: a test
        // that fails before closing its session must not leave a Chromium behind.
        unsafe { libc::kill(-(self.child.id() as i32), libc::SIGKILL) };
        let _ = self.child.wait();
    }
}

/// chromedriver on a free port, or `None` (skip) when it is not installed and `CI` is unset.
pub fn chromedriver() -> Option<Driver> {
    let found = Command::new("chromedriver").arg("--version").output().is_ok_and(|o| o.status.success()) && Path::new("/usr/bin/chromium").exists();
    if !found {
        if std::env::var_os("CI").is_some() {
            panic!("chromium and chromedriver are needed for the browser tests (apt-get install chromium chromium-driver; scripts/setup.sh does it)");
        }
        eprintln!("skipping the browser test: chromium/chromedriver not installed");
        return None;
    }
    let port = free_port();
    let child = Command::new("chromedriver")
        .arg(format!("--port={port}"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .process_group(0)
        .spawn()
        .expect("chromedriver starts");
    // Owned by the guard from here on, so it is stopped whatever happens.
    let driver = Driver { child, url: format!("http://127.0.0.1:{port}") };
    for _ in 0..100 {
        if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return Some(driver);
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    panic!("chromedriver did not start on port {port}");
}

pub async fn browser(driver: &Driver, profile: &Path) -> Client {
    let caps = json!({
        "browserName": "chrome",
        "goog:loggingPrefs": { "browser": "ALL" },
        "goog:chromeOptions": {
            "binary": "/usr/bin/chromium",
            "args": ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--disable-background-networking",
                     "--disable-component-update", "--disable-sync", "--no-first-run", "--window-size=1400,1000",
                     format!("--user-data-dir={}", profile.display())],
        },
    });
    let Value::Object(caps) = caps else { unreachable!() };
    ClientBuilder::new(hyper_util::client::legacy::connect::HttpConnector::new()).capabilities(caps).connect(&driver.url).await.expect("a browser session")
}

pub async fn wait_for(c: &Client, css: &str) -> fantoccini::elements::Element {
    c.wait().at_most(WAIT).for_element(Locator::Css(css)).await.unwrap_or_else(|e| panic!("waiting for `{css}`: {e}"))
}


/// The text of the first element matching `css` once it contains `needle` (waiting up to `WAIT`).
/// The element is found afresh on each try: a reactive page may replace it between the find and
/// the read, which WebDriver reports as a stale element reference.
pub async fn wait_text(c: &Client, css: &str, needle: &str) -> String {
    let start = std::time::Instant::now();
    let mut last = String::new();
    while start.elapsed() < WAIT {
        if let Ok(el) = c.find(Locator::Css(css)).await
            && let Ok(text) = el.text().await
        {
            if text.contains(needle) {
                return text;
            }
            last = text;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("waiting for `{css}` to contain {needle:?}: it says {last:?}");
}
