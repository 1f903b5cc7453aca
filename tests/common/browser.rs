//! Debian's Chromium, headless, driven over the DevTools protocol on a pipe
//! (`--remote-debugging-pipe`: commands in on fd 3, answers and events out on fd 4, each a JSON
//! message ended by a NUL): a page opened as a user would open it, what it logged and fetched,
//! scripts evaluated in it, the mouse moved over it, and a screenshot.

use std::io::{Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{channel, Receiver};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

/// Debian's Chromium (`apt-get install chromium`; `make test` installs it).
const CHROMIUM: &str = "/usr/bin/chromium";

/// How long one command may take to answer.
const ANSWER_WITHIN: Duration = Duration::from_secs(60);

/// Chromium, where installed; None (with a note) where not.
pub fn chromium() -> Option<&'static str> {
    if Path::new(CHROMIUM).is_file() {
        Some(CHROMIUM)
    } else {
        eprintln!("skipped: no {CHROMIUM} (`make test` installs Debian's chromium)");
        None
    }
}

/// A headless Chromium with one page open.
pub struct Browser {
    child: Child,
    commands: std::io::PipeWriter,
    messages: Receiver<Value>,
    next_id: u64,
    session: String,
    /// Every event heard so far, in order.
    pub events: Vec<Value>,
    _profile: tempfile::TempDir,
}

impl Browser {
    /// Starts Chromium headless, as the machine's probe starts it (no sandbox as root, no
    /// background networking, a fresh profile), with a blank page attached.
    pub fn start(chromium: &str) -> Self {
        let profile = tempfile::tempdir().unwrap();
        let (to_browser, commands) = std::io::pipe().unwrap();
        let (mut from_browser, answers) = std::io::pipe().unwrap();
        let (into, out) = (to_browser.as_raw_fd(), answers.as_raw_fd());
        let mut command = Command::new(chromium);
        command
            .args([
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-quic",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--window-size=1200,1400",
                "--remote-debugging-pipe",
            ])
            .arg(format!("--user-data-dir={}", profile.path().display()))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        // SAFETY: only async-signal-safe calls (fcntl, dup2) between fork and exec.
        unsafe {
            command.pre_exec(move || {
                // Out of the way of 3 and 4 first, then onto them (dup2 clears close-on-exec).
                let high_in = libc::fcntl(into, libc::F_DUPFD, 10);
                let high_out = libc::fcntl(out, libc::F_DUPFD, 10);
                if high_in < 0
                    || high_out < 0
                    || libc::dup2(high_in, 3) < 0
                    || libc::dup2(high_out, 4) < 0
                {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let child = command.spawn().expect("chromium starts");
        drop((to_browser, answers));
        let (sender, messages) = channel();
        std::thread::spawn(move || {
            let mut pending = Vec::new();
            let mut buffer = [0u8; 65536];
            while let Ok(n) = from_browser.read(&mut buffer) {
                if n == 0 {
                    break;
                }
                pending.extend_from_slice(&buffer[..n]);
                while let Some(end) = pending.iter().position(|&b| b == 0) {
                    let message: Vec<u8> = pending.drain(..=end).collect();
                    let parsed = serde_json::from_slice(&message[..end]).expect("a JSON message");
                    if sender.send(parsed).is_err() {
                        return;
                    }
                }
            }
        });
        let mut browser = Self {
            child,
            commands,
            messages,
            next_id: 0,
            session: String::new(),
            events: Vec::new(),
            _profile: profile,
        };
        let target = browser.call("Target.createTarget", json!({"url": "about:blank"}));
        let target = target["targetId"].as_str().expect("a target").to_string();
        let attached =
            browser.call("Target.attachToTarget", json!({"targetId": target, "flatten": true}));
        browser.session = attached["sessionId"].as_str().expect("a session").to_string();
        for domain in ["Runtime", "Log", "Network", "Page"] {
            browser.call(&format!("{domain}.enable"), json!({}));
        }
        browser
    }

    /// Sends `method` (to the page, once attached) and waits for its result.
    pub fn call(&mut self, method: &str, params: Value) -> Value {
        self.next_id += 1;
        let id = self.next_id;
        let mut message = json!({"id": id, "method": method, "params": params});
        if !self.session.is_empty() {
            message["sessionId"] = json!(self.session);
        }
        let mut bytes = serde_json::to_vec(&message).unwrap();
        bytes.push(0);
        self.commands.write_all(&bytes).expect("chromium reads its pipe");
        let until = Instant::now() + ANSWER_WITHIN;
        loop {
            let message = self.next(until).unwrap_or_else(|| panic!("no answer to {method}"));
            if message["id"] == id {
                assert!(message.get("error").is_none(), "{method}: {message}");
                return message["result"].clone();
            }
            self.events.push(message);
        }
    }

    /// The next message, before `until`.
    fn next(&mut self, until: Instant) -> Option<Value> {
        self.messages.recv_timeout(until.saturating_duration_since(Instant::now())).ok()
    }

    /// Opens `file` and waits for its load event: the seconds it took.
    pub fn open(&mut self, file: &Path) -> f64 {
        let url = format!("file://{}", file.canonicalize().unwrap().display());
        let (started, heard) = (Instant::now(), self.events.len());
        self.call("Page.navigate", json!({"url": url}));
        let until = started + ANSWER_WITHIN;
        while !self.events[heard..].iter().any(|e| e["method"] == "Page.loadEventFired") {
            let event = self.next(until).unwrap_or_else(|| panic!("{url} did not load"));
            self.events.push(event);
        }
        started.elapsed().as_secs_f64()
    }

    /// The value of `expression` evaluated in the page (a promise awaited).
    pub fn evaluate(&mut self, expression: &str) -> Value {
        let result = self.call(
            "Runtime.evaluate",
            json!({"expression": expression, "returnByValue": true, "awaitPromise": true}),
        );
        assert!(result.get("exceptionDetails").is_none(), "{expression}: {result}");
        result["result"]["value"].clone()
    }

    /// Moves the mouse to (`x`, `y`), CSS pixels of the viewport.
    pub fn move_mouse(&mut self, x: f64, y: f64) {
        self.call("Input.dispatchMouseEvent", json!({"type": "mouseMoved", "x": x, "y": y}));
    }

    /// Lets the page run for `time`, hearing its events.
    pub fn wait(&mut self, time: Duration) {
        let until = Instant::now() + time;
        while let Some(event) = self.next(until) {
            self.events.push(event);
        }
    }

    /// What the page logged as an error, and exceptions it did not catch.
    pub fn errors(&self) -> Vec<String> {
        self.events
            .iter()
            .filter(|e| {
                let method = e["method"].as_str().unwrap_or("");
                (method == "Runtime.consoleAPICalled" && e["params"]["type"] == "error")
                    || method == "Runtime.exceptionThrown"
                    || (method == "Log.entryAdded" && e["params"]["entry"]["level"] == "error")
            })
            .map(|e| e["params"].to_string())
            .collect()
    }

    /// Every URL the page requested.
    pub fn requests(&self) -> Vec<String> {
        self.events
            .iter()
            .filter(|e| e["method"] == "Network.requestWillBeSent")
            .filter_map(|e| e["params"]["request"]["url"].as_str().map(str::to_string))
            .collect()
    }

    /// A PNG of what the window shows into `path`.
    pub fn screenshot(&mut self, path: &PathBuf) {
        use base64::Engine as _;
        let shot = self.call("Page.captureScreenshot", json!({"format": "png"}));
        let data = shot["data"].as_str().expect("PNG data");
        let png = base64::engine::general_purpose::STANDARD.decode(data).unwrap();
        std::fs::write(path, png).unwrap();
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
