//! HTTPS on loopback for tests: a throw-away certificate authority (what a proxy that
//! intercepts HTTPS puts in a machine's trust store, or what a test trusts explicitly)
//! and an axum router served with a certificate it signed for `127.0.0.1`.

use std::sync::Arc;

use tokio_rustls::rustls;

/// A test CA and a server certificate it signed for `127.0.0.1` and `localhost`.
pub struct TestCa {
    /// The CA's certificate (PEM): what a client must trust.
    pub pem: String,
    config: Arc<rustls::ServerConfig>,
}

impl Default for TestCa {
    fn default() -> Self {
        Self::new()
    }
}

impl TestCa {
    pub fn new() -> Self {
        use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair};
        let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
        ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca.distinguished_name.push(DnType::CommonName, "Continuity test CA");
        let ca = CertifiedIssuer::self_signed(ca, KeyPair::generate().unwrap()).unwrap();
        let leaf_key = KeyPair::generate().unwrap();
        let leaf = CertificateParams::new(vec!["127.0.0.1".to_owned(), "localhost".to_owned()])
            .unwrap()
            .signed_by(&leaf_key, &ca)
            .unwrap();
        let key = rustls::pki_types::PrivateKeyDer::try_from(leaf_key.serialize_der()).unwrap();
        let config = rustls::ServerConfig::builder_with_provider(Arc::new(rustls::crypto::aws_lc_rs::default_provider()))
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(vec![leaf.der().clone(), ca.der().clone()], key)
            .unwrap();
        Self { pem: ca.pem(), config: Arc::new(config) }
    }

    /// Accepts TLS with the server certificate (e.g. after an SMTP `STARTTLS`).
    pub fn acceptor(&self) -> tokio_rustls::TlsAcceptor {
        tokio_rustls::TlsAcceptor::from(self.config.clone())
    }

    /// Serves `app` over HTTPS on a free loopback port until the runtime ends; returns
    /// its base URL (`https://127.0.0.1:PORT`).
    pub async fn serve(&self, app: axum::Router) -> String {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("https://127.0.0.1:{}", listener.local_addr().unwrap().port());
        let acceptor = tokio_rustls::TlsAcceptor::from(self.config.clone());
        tokio::spawn(async move {
            loop {
                let Ok((tcp, _)) = listener.accept().await else { break };
                let (acceptor, app) = (acceptor.clone(), app.clone());
                tokio::spawn(async move {
                    let Ok(tls) = acceptor.accept(tcp).await else { return };
                    let service = hyper_util::service::TowerToHyperService::new(app);
                    let _ = hyper_util::server::conn::auto::Builder::new(hyper_util::rt::TokioExecutor::new())
                        .serve_connection(hyper_util::rt::TokioIo::new(tls), service)
                        .await;
                });
            }
        });
        base
    }
}
