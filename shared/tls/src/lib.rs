//! The process's outbound TLS client configuration.
//!
//! Every HTTPS client we build (the AWS SDK's, through `store_aws::sdk_http`; search and
//! embedding endpoints, identity providers' keys, client metadata documents, source
//! APIs, notification receivers, the CLI's downloads) takes its configuration from
//! [`client_config`] (`reqwest`'s `use_preconfigured_tls`). A server's certificate is
//! trusted when it chains to one of:
//!
//! 1. the built-in roots (Mozilla's, `webpki-roots`: compiled in, nothing to read), or
//!    a root the caller passed ([`client_config_trusting`]);
//! 2. else the machine's trusted roots (`rustls-native-certs`: `SSL_CERT_FILE` /
//!    `SSL_CERT_DIR`, else the system store), so a proxy that intercepts HTTPS with its
//!    own root keeps working. They are read once per process, the first time a
//!    certificate is not trusted by (1), and kept.
//!
//! Why: reading the machine's roots is a directory scan and a PEM decode of every
//! certificate — about 4 ms on this Debian machine — and it used to happen for each
//! client built and again in the AWS SDK's client constructor: four times during a
//! Lambda function's start-up, before it answered anything (docs/benchmarks.md, "Lambda
//! cold start"). AWS's endpoints chain to roots of (1), so a function now never reads
//! them.
//!
//! Nothing is relaxed: both stages are rustls's own WebPKI verifier, and signatures are
//! checked by the same crypto provider (aws-lc-rs) with its own algorithm list. The only
//! error that moves on to (2) is an unknown issuer; any other refusal stands.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, LazyLock, OnceLock};

use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{CertificateError, ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme};

/// How many times this process has read the machine's roots (0 or 1; for tests).
static LOADS: AtomicUsize = AtomicUsize::new(0);

fn provider() -> Arc<CryptoProvider> {
    static PROVIDER: LazyLock<Arc<CryptoProvider>> = LazyLock::new(|| Arc::new(rustls::crypto::aws_lc_rs::default_provider()));
    PROVIDER.clone()
}

/// The machine's trusted roots, read on first use. Certificates that do not parse are
/// skipped (as `reqwest` and the AWS SDK do); reading errors are logged once.
fn native_roots() -> Arc<Vec<rustls::pki_types::TrustAnchor<'static>>> {
    static ROOTS: LazyLock<Arc<Vec<rustls::pki_types::TrustAnchor<'static>>>> = LazyLock::new(|| {
        LOADS.fetch_add(1, Ordering::Relaxed);
        let found = rustls_native_certs::load_native_certs();
        if !found.errors.is_empty() {
            tracing::warn!(errors = ?found.errors, "some of the machine's trusted root certificates could not be read");
        }
        let mut roots = RootCertStore::empty();
        let (_, skipped) = roots.add_parsable_certificates(found.certs);
        if skipped > 0 {
            tracing::debug!(skipped, "trusted root certificates that do not parse were skipped");
        }
        Arc::new(roots.roots)
    });
    ROOTS.clone()
}

/// How many times this process has read the machine's trusted roots: 0 until a
/// certificate first needs them, then 1 for good.
pub fn native_root_loads() -> usize {
    LOADS.load(Ordering::Relaxed)
}

/// How many roots are built in (Mozilla's set).
pub fn builtin_roots() -> usize {
    webpki_roots::TLS_SERVER_ROOTS.len()
}

/// The two-stage verifier of the module docs; each stage is built at first use.
#[derive(Debug)]
struct Verifier {
    provider: Arc<CryptoProvider>,
    extra: Vec<CertificateDer<'static>>,
    builtin: OnceLock<Result<Arc<WebPkiServerVerifier>, String>>,
    machine: OnceLock<Result<Arc<WebPkiServerVerifier>, String>>,
}

impl Verifier {
    fn build(&self, with_machine_roots: bool) -> Result<Arc<WebPkiServerVerifier>, String> {
        let mut roots = RootCertStore { roots: webpki_roots::TLS_SERVER_ROOTS.to_vec() };
        for cert in &self.extra {
            roots.add(cert.clone()).map_err(|e| format!("a configured root certificate is unusable: {e}"))?;
        }
        if with_machine_roots {
            roots.roots.extend(native_roots().iter().cloned());
        }
        WebPkiServerVerifier::builder_with_provider(Arc::new(roots), self.provider.clone())
            .build()
            .map_err(|e| format!("no trusted root certificates to verify the server with ({e})"))
    }

    fn stage(&self, machine: bool) -> Result<&Arc<WebPkiServerVerifier>, rustls::Error> {
        let cell = if machine { &self.machine } else { &self.builtin };
        cell.get_or_init(|| self.build(machine)).as_ref().map_err(|e| rustls::Error::General(e.clone()))
    }
}

impl ServerCertVerifier for Verifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        match self.stage(false)?.verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now) {
            Err(rustls::Error::InvalidCertificate(CertificateError::UnknownIssuer)) => {
                self.stage(true)?.verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now)
            }
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.provider.signature_verification_algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.provider.signature_verification_algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider.signature_verification_algorithms.supported_schemes()
    }
}

fn config(extra: Vec<CertificateDer<'static>>) -> ClientConfig {
    let provider = provider();
    let verifier = Arc::new(Verifier { provider: provider.clone(), extra, builtin: OnceLock::new(), machine: OnceLock::new() });
    match ClientConfig::builder_with_provider(provider).with_safe_default_protocol_versions() {
        Ok(b) => b.dangerous().with_custom_certificate_verifier(verifier).with_no_client_auth(),
        // aws-lc-rs supports TLS 1.2 and 1.3: unreachable, kept as rustls's defaults.
        Err(_) => ClientConfig::builder().dangerous().with_custom_certificate_verifier(verifier).with_no_client_auth(),
    }
}

/// The client configuration every outbound HTTPS client of the process uses: TLS 1.2 and
/// 1.3 with aws-lc-rs, server certificates verified as the module docs say. Cheap to call
/// (the configuration is built once; this clones it).
pub fn client_config() -> ClientConfig {
    static SHARED: LazyLock<ClientConfig> = LazyLock::new(|| config(Vec::new()));
    SHARED.clone()
}

/// [`client_config`] trusting `extra_pem` (PEM certificates) as well: for a deployment's
/// own CA, or a test server.
///
/// # Errors
/// A message naming the problem when `extra_pem` holds no certificate, or one that does
/// not parse.
pub fn client_config_trusting(extra_pem: &[Vec<u8>]) -> Result<ClientConfig, String> {
    use rustls::pki_types::pem::PemObject;
    let mut extra = Vec::new();
    for pem in extra_pem {
        let certs = CertificateDer::pem_slice_iter(pem)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| format!("a configured root is not PEM: {e}"))?;
        if certs.is_empty() {
            return Err("a configured root holds no certificate".into());
        }
        extra.extend(certs);
    }
    Ok(config(extra))
}

#[cfg(test)]
mod tests {
    use std::io::{Read, Write};

    use rustls::pki_types::PrivateKeyDer;

    use super::*;

    struct Server {
        ca_pem: String,
        config: Arc<rustls::ServerConfig>,
    }

    fn server(name: &str) -> Server {
        use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair};
        let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
        ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca.distinguished_name.push(DnType::CommonName, "tls crate test CA");
        let ca = CertifiedIssuer::self_signed(ca, KeyPair::generate().unwrap()).unwrap();
        let key = KeyPair::generate().unwrap();
        let leaf = CertificateParams::new(vec![name.to_owned()]).unwrap().signed_by(&key, &ca).unwrap();
        let config = rustls::ServerConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(vec![leaf.der().clone()], PrivateKeyDer::try_from(key.serialize_der()).unwrap())
            .unwrap();
        Server { ca_pem: ca.pem(), config: Arc::new(config) }
    }

    /// A whole handshake in memory, then one message each way.
    fn handshake(client: ClientConfig, server: &Server, name: &str) -> Result<(), rustls::Error> {
        let mut c = rustls::ClientConnection::new(Arc::new(client), ServerName::try_from(name.to_owned()).unwrap())?;
        let mut s = rustls::ServerConnection::new(server.config.clone())?;
        c.writer().write_all(b"ping").unwrap();
        for _ in 0..20 {
            let mut buf = Vec::new();
            c.write_tls(&mut buf).unwrap();
            s.read_tls(&mut buf.as_slice()).unwrap();
            s.process_new_packets()?;
            let mut buf = Vec::new();
            s.write_tls(&mut buf).unwrap();
            c.read_tls(&mut buf.as_slice()).unwrap();
            c.process_new_packets()?;
            if !c.is_handshaking() && !s.is_handshaking() {
                let mut got = [0u8; 4];
                if s.reader().read_exact(&mut got).is_ok() {
                    assert_eq!(&got, b"ping");
                    return Ok(());
                }
            }
        }
        panic!("the handshake did not finish");
    }

    #[test]
    fn the_machine_roots_are_read_once_and_only_for_a_certificate_the_built_in_ones_do_not_know() {
        assert!(builtin_roots() > 100, "{}", builtin_roots());
        // Building configurations reads nothing.
        let _ = client_config();
        let known = server("service.test");
        let trusting = client_config_trusting(&[known.ca_pem.clone().into_bytes()]).unwrap();
        assert_eq!(native_root_loads(), 0, "no root may be read before a handshake");

        // A server signed by a CA we were told to trust: accepted by the first stage.
        handshake(trusting.clone(), &known, "service.test").unwrap();
        // The wrong name for that certificate: refused, and not retried with more roots.
        let err = handshake(trusting, &known, "other.test").unwrap_err();
        assert!(matches!(err, rustls::Error::InvalidCertificate(CertificateError::NotValidForNameContext { .. })), "{err:?}");
        assert_eq!(native_root_loads(), 0);

        // Neither the built-in roots nor the machine's know that CA: refused, after
        // reading the machine's roots once.
        let err = handshake(client_config(), &known, "service.test").unwrap_err();
        assert!(matches!(err, rustls::Error::InvalidCertificate(CertificateError::UnknownIssuer)), "{err:?}");
        assert_eq!(native_root_loads(), 1);
        // Another CA of the same name, with the first CA trusted: refused (its signature
        // does not verify); nothing read again.
        let stranger = server("service.test");
        let err = handshake(client_config_trusting(&[known.ca_pem.clone().into_bytes()]).unwrap(), &stranger, "service.test")
            .unwrap_err();
        assert!(matches!(err, rustls::Error::InvalidCertificate(_)), "{err:?}");
        let err = handshake(client_config(), &stranger, "service.test").unwrap_err();
        assert!(matches!(err, rustls::Error::InvalidCertificate(_)), "{err:?}");
        assert_eq!(native_root_loads(), 1);
    }

    #[test]
    fn configured_roots_must_be_certificates() {
        assert!(client_config_trusting(&[b"not a certificate".to_vec()]).unwrap_err().contains("no certificate"));
        let broken = b"-----BEGIN CERTIFICATE-----\n!!!!\n-----END CERTIFICATE-----\n".to_vec();
        assert!(client_config_trusting(&[broken]).unwrap_err().contains("not PEM"));
    }
}
