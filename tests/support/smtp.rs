//! An SMTP server run by the tests: on a loopback port, it offers `STARTTLS` (a test
//! CA's certificate) and `AUTH PLAIN`/`LOGIN` once encrypted, and keeps every message
//! with its envelope, the credentials it was sent with and whether the session was
//! encrypted. It refuses recipients whose address starts with `reject` (550) and, while
//! set, answers `MAIL FROM` with 451 (a server that cannot take mail now).

use std::sync::{Arc, Mutex};

use base64::Engine as _;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};

use crate::tls::TestCa;

/// One message as it arrived.
#[derive(Debug, Clone, Default)]
pub struct Received {
    pub user: Option<String>,
    pub password: Option<String>,
    pub from: String,
    pub to: Vec<String>,
    /// The message as sent (headers and body, dot-stuffing removed).
    pub data: String,
    pub encrypted: bool,
}

impl Received {
    /// The envelope, with the subject and text decoded from the message.
    pub fn decoded(&self) -> contract::mail::Arrived {
        let parsed = mail_parser::MessageParser::default().parse(self.data.as_bytes()).unwrap();
        contract::mail::Arrived {
            from: self.from.clone(),
            to: self.to.clone(),
            subject: parsed.subject().unwrap_or_default().to_owned(),
            text: parsed.body_text(0).unwrap_or_default().into_owned(),
        }
    }
}

#[derive(Default)]
struct State {
    received: Vec<Received>,
    busy: bool,
}

pub struct SmtpServer {
    pub port: u16,
    /// The CA the server's certificate chains to (PEM): what the client must trust.
    pub ca_pem: String,
    state: Arc<Mutex<State>>,
}

impl SmtpServer {
    pub async fn start() -> Self {
        let ca = TestCa::new();
        let acceptor = ca.acceptor();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let state = Arc::new(Mutex::new(State::default()));
        let s = state.clone();
        tokio::spawn(async move {
            loop {
                let Ok((tcp, _)) = listener.accept().await else { break };
                let (acceptor, s) = (acceptor.clone(), s.clone());
                tokio::spawn(async move {
                    let mut session = Session::default();
                    if session.run(tcp, false, &s).await == Next::StartTls
                        && let Ok(tls) = acceptor.accept(session.take_stream()).await
                    {
                        session.run(tls, true, &s).await;
                    }
                });
            }
        });
        Self { port, ca_pem: ca.pem, state }
    }

    /// `smtp://user:password@127.0.0.1:PORT` (STARTTLS).
    pub fn url(&self, user: &str, password: &str) -> String {
        format!("smtp://{user}:{password}@127.0.0.1:{}", self.port)
    }

    /// Every message so far, and forgets them.
    pub fn take(&self) -> Vec<Received> {
        std::mem::take(&mut self.state.lock().unwrap().received)
    }

    /// The messages so far, decoded (subject and text as sent), without forgetting them.
    pub fn arrived(&self) -> Vec<contract::mail::Arrived> {
        self.state.lock().unwrap().received.iter().map(Received::decoded).collect()
    }

    /// While set, `MAIL FROM` is answered 451.
    pub fn set_busy(&self, busy: bool) {
        self.state.lock().unwrap().busy = busy;
    }
}

#[derive(PartialEq)]
enum Next {
    Done,
    StartTls,
}

#[derive(Default)]
struct Session {
    user: Option<String>,
    password: Option<String>,
    from: String,
    to: Vec<String>,
    tcp: Option<tokio::net::TcpStream>,
}

fn decode(b64: &str) -> String {
    String::from_utf8_lossy(&base64::engine::general_purpose::STANDARD.decode(b64.trim()).unwrap_or_default()).into_owned()
}

fn address(arg: &str) -> String {
    arg.split_once('<').and_then(|(_, a)| a.split_once('>')).map_or_else(|| arg.trim().to_owned(), |(a, _)| a.to_owned())
}

impl Session {
    fn take_stream(&mut self) -> tokio::net::TcpStream {
        self.tcp.take().unwrap()
    }

    async fn run<S>(&mut self, stream: S, encrypted: bool, state: &Mutex<State>) -> Next
    where
        S: AsyncRead + AsyncWrite + Unpin + Send + 'static + IntoTcp,
    {
        let mut io = BufReader::new(stream);
        if !encrypted {
            let _ = io.write_all(b"220 test.example ESMTP\r\n").await;
        }
        let mut line = String::new();
        loop {
            line.clear();
            if io.read_line(&mut line).await.unwrap_or(0) == 0 {
                return Next::Done;
            }
            let cmd = line.trim_end().to_owned();
            let upper = cmd.to_ascii_uppercase();
            let reply: String = if upper.starts_with("EHLO") || upper.starts_with("HELO") {
                if encrypted {
                    "250-test.example\r\n250 AUTH PLAIN LOGIN\r\n".into()
                } else {
                    "250-test.example\r\n250 STARTTLS\r\n".into()
                }
            } else if upper == "STARTTLS" && !encrypted {
                let _ = io.write_all(b"220 go ahead\r\n").await;
                self.tcp = io.into_inner().into_tcp();
                return Next::StartTls;
            } else if upper.starts_with("AUTH PLAIN") && encrypted {
                let plain = match cmd.split_whitespace().nth(2) {
                    Some(b) => decode(b),
                    None => {
                        let _ = io.write_all(b"334 \r\n").await;
                        line.clear();
                        let _ = io.read_line(&mut line).await;
                        decode(&line)
                    }
                };
                let mut parts = plain.split('\0').skip(1);
                self.user = parts.next().map(str::to_owned);
                self.password = parts.next().map(str::to_owned);
                "235 2.7.0 accepted\r\n".into()
            } else if upper.starts_with("AUTH LOGIN") && encrypted {
                let _ = io.write_all(b"334 VXNlcm5hbWU6\r\n").await;
                line.clear();
                let _ = io.read_line(&mut line).await;
                self.user = Some(decode(&line));
                let _ = io.write_all(b"334 UGFzc3dvcmQ6\r\n").await;
                line.clear();
                let _ = io.read_line(&mut line).await;
                self.password = Some(decode(&line));
                "235 2.7.0 accepted\r\n".into()
            } else if upper.starts_with("AUTH") {
                "530 5.7.0 must issue STARTTLS first\r\n".into()
            } else if upper.starts_with("MAIL FROM:") {
                if state.lock().unwrap().busy {
                    "451 4.3.0 try again later\r\n".into()
                } else {
                    self.from = address(&cmd[10..]);
                    self.to.clear();
                    "250 ok\r\n".into()
                }
            } else if upper.starts_with("RCPT TO:") {
                let to = address(&cmd[8..]);
                if to.starts_with("reject") {
                    "550 5.1.1 no such user\r\n".into()
                } else {
                    self.to.push(to);
                    "250 ok\r\n".into()
                }
            } else if upper == "DATA" {
                let _ = io.write_all(b"354 end with .\r\n").await;
                let mut data = String::new();
                loop {
                    line.clear();
                    if io.read_line(&mut line).await.unwrap_or(0) == 0 {
                        return Next::Done;
                    }
                    if line == ".\r\n" {
                        break;
                    }
                    data.push_str(line.strip_prefix('.').unwrap_or(&line));
                }
                state.lock().unwrap().received.push(Received {
                    user: self.user.clone(),
                    password: self.password.clone(),
                    from: self.from.clone(),
                    to: self.to.clone(),
                    data,
                    encrypted,
                });
                "250 queued\r\n".into()
            } else if upper == "QUIT" {
                let _ = io.write_all(b"221 bye\r\n").await;
                return Next::Done;
            } else if upper == "RSET" || upper == "NOOP" {
                "250 ok\r\n".into()
            } else {
                "502 not implemented\r\n".into()
            };
            if io.write_all(reply.as_bytes()).await.is_err() {
                return Next::Done;
            }
        }
    }
}

/// The plain TCP stream back out of a session (to start TLS on it); `None` once TLS.
pub trait IntoTcp {
    fn into_tcp(self) -> Option<tokio::net::TcpStream>;
}

impl IntoTcp for tokio::net::TcpStream {
    fn into_tcp(self) -> Option<tokio::net::TcpStream> {
        Some(self)
    }
}

impl IntoTcp for tokio_rustls::server::TlsStream<tokio::net::TcpStream> {
    fn into_tcp(self) -> Option<tokio::net::TcpStream> {
        None
    }
}
