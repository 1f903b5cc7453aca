//! Real servers on loopback for the tests of URL roots, each a process of its own, ended when
//! dropped: s3s-fs, an S3-compatible server (`make test` builds it into `.tools/`), and
//! Debian's nginx, which answers range GETs. Objects reach the S3 server by PutObject, as a
//! user's upload would.

use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use object_store::aws::AmazonS3Builder;
use object_store::path::Path as Key;
use object_store::{ObjectStore, ObjectStoreExt, PutPayload};

/// The S3 server's credentials in these tests.
pub const ACCESS_KEY: &str = "feedbench-test";
/// Its secret.
pub const SECRET_KEY: &str = "feedbench-test-secret";

/// A free port on loopback (bound, then let go for the server to take).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// A server process, killed when dropped.
pub struct Server {
    child: Child,
    /// Where it listens.
    pub port: u16,
}

impl Server {
    /// Starts `command` and waits until `port` takes connections (the server's log goes to
    /// `log`); a server that ends first fails the test with its log.
    fn start(mut command: Command, port: u16, log: &Path) -> Self {
        let out = std::fs::File::create(log).unwrap();
        let err = out.try_clone().unwrap();
        let child = command.stdout(out).stderr(err).stdin(Stdio::null()).spawn().unwrap();
        let mut server = Self { child, port };
        let started = Instant::now();
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            if let Some(status) = server.child.try_wait().unwrap() {
                let log = std::fs::read_to_string(log).unwrap_or_default();
                panic!("{command:?} ended ({status}) before it listened: {log}");
            }
            assert!(started.elapsed() < Duration::from_secs(30), "{command:?} never listened");
            std::thread::sleep(Duration::from_millis(20));
        }
        server
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The S3 server binary, or None (with a visible note) where it was not built.
pub fn s3_server_binary() -> Option<PathBuf> {
    let path = std::env::var_os("FEEDBENCH_S3_SERVER")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join(".tools/s3s-fs/bin/s3s-fs"));
    if path.is_file() {
        return Some(path);
    }
    eprintln!("SKIPPED: no S3 server at {} (make test builds it)", path.display());
    None
}

/// An S3-compatible server over a directory of its own, with credentials.
pub struct S3 {
    /// The server process.
    pub server: Server,
    /// Its endpoint, `http://127.0.0.1:PORT`.
    pub endpoint: String,
    /// The directory it keeps its buckets in.
    pub data: PathBuf,
}

impl S3 {
    /// Starts the server with its data in `dir/s3`, or None where it was not built.
    pub fn start(dir: &Path) -> Option<Self> {
        let binary = s3_server_binary()?;
        let data = dir.join("s3");
        std::fs::create_dir_all(&data).unwrap();
        let port = free_port();
        let mut command = Command::new(binary);
        command.args(["--host", "127.0.0.1", "--port", &port.to_string()]);
        command.args(["--access-key", ACCESS_KEY, "--secret-key", SECRET_KEY]).arg(&data);
        let server = Server::start(command, port, &dir.join("s3.log"));
        Some(Self { server, endpoint: format!("http://127.0.0.1:{port}"), data })
    }

    /// The environment a user would set to read from it (AWS's own variables).
    pub fn env(&self) -> Vec<(&'static str, String)> {
        vec![
            ("AWS_ENDPOINT_URL", self.endpoint.clone()),
            ("AWS_ACCESS_KEY_ID", ACCESS_KEY.into()),
            ("AWS_SECRET_ACCESS_KEY", SECRET_KEY.into()),
            ("AWS_REGION", "us-east-1".into()),
        ]
    }

    /// The same as storage options (`KEY=VALUE` pairs, Python's `storage_options`).
    pub fn options(&self) -> Vec<(String, String)> {
        vec![
            ("endpoint".into(), self.endpoint.clone()),
            ("access_key_id".into(), ACCESS_KEY.into()),
            ("secret_access_key".into(), SECRET_KEY.into()),
            ("allow_http".into(), "true".into()),
        ]
    }

    /// Makes `bucket` and puts every file under `local` into it under `prefix` (PutObject, one
    /// object a file): the URL of the copy, `s3://bucket/prefix`.
    pub fn upload(&self, bucket: &str, prefix: &str, local: &Path) -> String {
        std::fs::create_dir_all(self.data.join(bucket)).unwrap();
        let (store, runtime) = self.client(bucket);
        for file in super::walk(local) {
            let within = file.strip_prefix(local).unwrap().to_str().unwrap();
            let key = Key::from(format!("{prefix}/{within}"));
            let bytes = std::fs::read(&file).unwrap();
            runtime.block_on(store.put(&key, PutPayload::from(bytes))).unwrap();
        }
        format!("s3://{bucket}/{prefix}")
    }

    /// A client of `bucket` (as a user's upload tool would be) and a runtime to run it on.
    fn client(&self, bucket: &str) -> (impl ObjectStore, tokio::runtime::Runtime) {
        let store = AmazonS3Builder::new()
            .with_endpoint(&self.endpoint)
            .with_allow_http(true)
            .with_bucket_name(bucket)
            .with_access_key_id(ACCESS_KEY)
            .with_secret_access_key(SECRET_KEY)
            .with_region("us-east-1")
            .build()
            .unwrap();
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        (store, runtime)
    }

    /// Replaces the object `key` of `bucket` with `bytes` (PutObject).
    pub fn replace(&self, bucket: &str, key: &str, bytes: Vec<u8>) {
        let (store, runtime) = self.client(bucket);
        runtime.block_on(store.put(&Key::from(key), PutPayload::from(bytes))).unwrap();
    }
}

/// Debian's nginx serving a directory over plain HTTP on loopback.
pub struct Nginx {
    /// The server process.
    pub server: Server,
    /// `http://127.0.0.1:PORT`.
    pub origin: String,
    /// Its access log: a line a request, `METHOD PATH RANGE`.
    pub log: PathBuf,
}

impl Nginx {
    /// Serves `root` (its files by their paths under it), its configuration and logs in
    /// `dir/nginx`; None (with a visible note) where nginx is not installed.
    pub fn start(root: &Path, dir: &Path) -> Option<Self> {
        let port = free_port();
        let command = Self::command(root, dir, port)?;
        let server = Server::start(command, port, &dir.join("nginx.log"));
        let log = dir.join("nginx/logs/access.log");
        Some(Self { server, origin: format!("http://127.0.0.1:{port}"), log })
    }

    /// The requests it has answered, a line each (`GET /ds/videos/….mp4 bytes=0-65535`).
    pub fn requests(&self) -> Vec<String> {
        std::fs::read_to_string(&self.log).unwrap_or_default().lines().map(str::to_string).collect()
    }

    /// The command that serves `root` on `port` (in the foreground, one process), its
    /// configuration and logs in `dir/nginx`; None (with a visible note) without nginx.
    pub fn command(root: &Path, dir: &Path, port: u16) -> Option<Command> {
        let binary = Path::new("/usr/sbin/nginx");
        if !binary.is_file() {
            eprintln!("SKIPPED: no nginx at {} (make test installs it)", binary.display());
            return None;
        }
        let prefix = dir.join("nginx");
        std::fs::create_dir_all(prefix.join("logs")).unwrap();
        let conf = format!(
            "daemon off; master_process off; worker_processes 1; pid {pid};\n\
             error_log {prefix}/logs/error.log;\n\
             events {{ worker_connections 256; }}\n\
             http {{ log_format requests '$request_method $uri $http_range';\n\
               access_log {prefix}/logs/access.log requests; client_body_temp_path {prefix}/body;\n\
               proxy_temp_path {prefix}/proxy; fastcgi_temp_path {prefix}/fastcgi;\n\
               uwsgi_temp_path {prefix}/uwsgi; scgi_temp_path {prefix}/scgi;\n\
               server {{ listen 127.0.0.1:{port}; root {root}; }} }}\n",
            pid = prefix.join("nginx.pid").display(),
            prefix = prefix.display(),
            root = root.display(),
        );
        let conf_path = prefix.join("nginx.conf");
        std::fs::write(&conf_path, conf).unwrap();
        let mut command = Command::new(binary);
        command.arg("-p").arg(&prefix).arg("-c").arg(&conf_path);
        Some(command)
    }
}

/// Runs `script` (bash) in a network namespace of its own whose loopback carries `rate`
/// (the kernel's `tbf` qdisc: `10mbit`), with `nginx` serving there on `port`, started first
/// and waited for: the script's (success, stdout, stderr). None (with a visible note) where
/// this process may not make a namespace (not root) or shape its link.
pub fn in_shaped_namespace(
    rate: &str,
    nginx: &Command,
    port: u16,
    script: &str,
) -> Option<(bool, String, String)> {
    let program = nginx.get_program().to_str().unwrap();
    let args: Vec<String> =
        nginx.get_args().map(|a| format!("'{}'", a.to_str().unwrap())).collect();
    let whole = format!(
        "set -e\n\
         ip link set lo up\n\
         ip link set lo mtu 1500\n\
         tc qdisc add dev lo root tbf rate {rate} burst 64kbit latency 400ms || exit 77\n\
         {program} {} &\n\
         server=$!\n\
         for i in $(seq 1 1000); do (exec 3<>/dev/tcp/127.0.0.1/{port}) 2>/dev/null && break; sleep 0.01; done\n\
         trap 'kill $server' EXIT\n\
         {script}\n",
        args.join(" ")
    );
    let output = Command::new("unshare").args(["-n", "bash", "-c", &whole]).output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    if output.status.code() == Some(77) || (!output.status.success() && stderr.contains("unshare"))
    {
        eprintln!("SKIPPED: no network namespace with a shaped link here (needs root): {stderr}");
        return None;
    }
    Some((output.status.success(), String::from_utf8_lossy(&output.stdout).into_owned(), stderr))
}

/// A TCP proxy on loopback that adds latency: every chunk it reads, either way, is passed on
/// `delay` after it arrived (chunks in flight together arrive together, as over a long link,
/// not one delay after another). Its connections end with the process.
pub struct SlowLink {
    /// Where it listens.
    pub port: u16,
}

impl SlowLink {
    /// Forwards connections on a free port to `upstream` on loopback, `delay` later each way.
    pub fn start(upstream: u16, delay: Duration) -> Self {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        std::thread::spawn(move || {
            for client in listener.incoming() {
                let Ok(client) = client else { continue };
                let Ok(server) = TcpStream::connect(("127.0.0.1", upstream)) else { continue };
                let _ = (client.set_nodelay(true), server.set_nodelay(true));
                delayed(client.try_clone().unwrap(), server.try_clone().unwrap(), delay);
                delayed(server, client, delay);
            }
        });
        Self { port }
    }
}

/// Passes what `from` sends on to `to`, each chunk `delay` after it arrived: one thread reads
/// and stamps, another writes when each is due.
fn delayed(mut from: TcpStream, mut to: TcpStream, delay: Duration) {
    use std::io::{Read, Write};
    let (sender, receiver) = std::sync::mpsc::channel::<(Instant, Vec<u8>)>();
    std::thread::spawn(move || {
        let mut buffer = vec![0u8; 64 * 1024];
        while let Ok(read) = from.read(&mut buffer) {
            if read == 0 || sender.send((Instant::now() + delay, buffer[..read].to_vec())).is_err()
            {
                break;
            }
        }
    });
    std::thread::spawn(move || {
        for (due, chunk) in receiver {
            std::thread::sleep(due.saturating_duration_since(Instant::now()));
            if to.write_all(&chunk).is_err() {
                break;
            }
        }
        let _ = to.shutdown(std::net::Shutdown::Write);
    });
}

/// What a [`FaultyFront`] does to the requests it gets.
#[derive(Debug, Clone, Copy)]
pub enum Fault {
    /// Answers the first `n` requests 503 SlowDown (as S3 throttles), forwards the rest.
    Throttle(usize),
    /// Answers every `k`-th request 503 SlowDown, forwards the others.
    ThrottleEvery(usize),
    /// Answers nothing, ever: a server that takes connections and hangs.
    Hang,
    /// Forwards each request, and passes on the answer's head with half its body, then closes.
    Truncate,
}

/// An HTTP front on loopback that forwards requests to a real server (`upstream`) and does a
/// [`Fault`] to them: one request a connection at a time, as a test needs.
pub struct FaultyFront {
    /// Where it listens.
    pub port: u16,
    /// Requests it answered 503 so far.
    pub throttled: std::sync::Arc<std::sync::atomic::AtomicUsize>,
}

impl FaultyFront {
    /// Starts the front on a free port.
    pub fn start(upstream: u16, fault: Fault) -> Self {
        use std::sync::atomic::{AtomicUsize, Ordering};
        use std::sync::Arc;
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let throttled = Arc::new(AtomicUsize::new(0));
        let count = throttled.clone();
        let seen = Arc::new(AtomicUsize::new(0));
        std::thread::spawn(move || {
            for client in listener.incoming() {
                let Ok(client) = client else { continue };
                let (count, seen) = (count.clone(), seen.clone());
                std::thread::spawn(move || {
                    let mut client = std::io::BufReader::new(client);
                    while let Some(request) = read_message(&mut client, false) {
                        if let Fault::Hang = fault {
                            std::thread::sleep(Duration::from_secs(3600));
                        }
                        let throttle = match fault {
                            Fault::Throttle(n) => count.load(Ordering::SeqCst) < n,
                            Fault::ThrottleEvery(k) => {
                                seen.fetch_add(1, Ordering::SeqCst) % k == k - 1
                            }
                            _ => false,
                        };
                        if throttle {
                            count.fetch_add(1, Ordering::SeqCst);
                            {
                                let body = "<Error><Code>SlowDown</Code><Message>Please reduce your request rate.</Message></Error>";
                                let answer = format!(
                                    "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/xml\r\nContent-Length: {}\r\n\r\n{body}",
                                    body.len()
                                );
                                if std::io::Write::write_all(client.get_mut(), answer.as_bytes())
                                    .is_err()
                                {
                                    return;
                                }
                                continue;
                            }
                        }
                        let Ok(mut server) = TcpStream::connect(("127.0.0.1", upstream)) else {
                            return;
                        };
                        if std::io::Write::write_all(&mut server, &request).is_err() {
                            return;
                        }
                        let mut server = std::io::BufReader::new(server);
                        let head_request = request.starts_with(b"HEAD ");
                        let Some(mut answer) = read_message(&mut server, head_request) else {
                            return;
                        };
                        if let Fault::Truncate = fault {
                            let head =
                                answer.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
                            answer.truncate(head + (answer.len() - head) / 2);
                            let _ = std::io::Write::write_all(client.get_mut(), &answer);
                            return;
                        }
                        if std::io::Write::write_all(client.get_mut(), &answer).is_err() {
                            return;
                        }
                    }
                });
            }
        });
        Self { port, throttled }
    }
}

/// One HTTP/1.1 message (its head and `Content-Length` bytes of body, none where
/// `bodiless`: the answer to a HEAD) read whole from `stream`; None at its end.
fn read_message(stream: &mut impl std::io::BufRead, bodiless: bool) -> Option<Vec<u8>> {
    let mut message = Vec::new();
    loop {
        let mut line = Vec::new();
        if stream.read_until(b'\n', &mut line).ok()? == 0 {
            return None;
        }
        message.extend_from_slice(&line);
        if line == b"\r\n" {
            break;
        }
    }
    let head = String::from_utf8_lossy(&message).to_ascii_lowercase();
    let length: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0);
    if length > 0 && !bodiless {
        let mut body = vec![0u8; length];
        stream.read_exact(&mut body).ok()?;
        message.extend_from_slice(&body);
    }
    Some(message)
}
