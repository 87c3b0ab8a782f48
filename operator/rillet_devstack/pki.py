"""Certificates and keys for the local control plane: a CA, the apiserver's serving certificate and
the service-account signing key pair, plus the node's certificates (kubelet client and serving,
the apiserver's kubelet client). Made once per state directory with `cryptography`."""

from __future__ import annotations

import ipaddress
import os
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import NameOID

VALIDITY = timedelta(days=365)


@dataclass(frozen=True)
class ControlPlanePki:
    """Paths of the PEM files the control plane is started with."""

    directory: Path

    @property
    def ca_cert(self) -> Path:
        return self.directory / "ca.crt"

    @property
    def ca_key(self) -> Path:
        return self.directory / "ca.key"

    @property
    def serving_cert(self) -> Path:
        return self.directory / "apiserver.crt"

    @property
    def serving_key(self) -> Path:
        return self.directory / "apiserver.key"

    @property
    def service_account_key(self) -> Path:
        return self.directory / "sa.key"

    @property
    def service_account_public_key(self) -> Path:
        return self.directory / "sa.pub"


def _pem_key(key: ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.TraditionalOpenSSL,
        serialization.NoEncryption(),
    )


def write_private(path: Path, data: bytes) -> None:
    """Write a file only its owner may read, from its creation on (no world-readable moment)."""
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "wb") as stream:
        stream.write(data)
    path.chmod(0o600)  # an existing file keeps its mode through O_CREAT


def ensure(directory: Path, *, extra_ips: tuple[str, ...] = ()) -> ControlPlanePki:
    """Create the PKI in `directory` unless it is already there; return its paths.

    `extra_ips` are further addresses the apiserver serves on (the node address pods reach).
    """
    pki = ControlPlanePki(directory)
    if pki.service_account_public_key.exists():
        return pki
    directory.mkdir(parents=True, exist_ok=True)
    now = datetime.now(UTC) - timedelta(minutes=5)

    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "rillet-devstack-ca")])
    ca_cert = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now)
        .not_valid_after(now + VALIDITY)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(ca_key, hashes.SHA256())
    )

    serving_key = ec.generate_private_key(ec.SECP256R1())
    names: list[x509.GeneralName] = [
        x509.DNSName(name)
        for name in ("localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc")
    ]
    names += [
        x509.IPAddress(ipaddress.ip_address(ip)) for ip in ("127.0.0.1", "10.0.0.1", *extra_ips)
    ]
    serving_cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kube-apiserver")]))
        .issuer_name(ca_name)
        .public_key(serving_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now)
        .not_valid_after(now + VALIDITY)
        .add_extension(x509.SubjectAlternativeName(names), critical=False)
        .sign(ca_key, hashes.SHA256())
    )

    sa_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)

    pki.ca_cert.write_bytes(ca_cert.public_bytes(serialization.Encoding.PEM))
    write_private(pki.ca_key, _pem_key(ca_key))
    pki.serving_cert.write_bytes(serving_cert.public_bytes(serialization.Encoding.PEM))
    write_private(pki.serving_key, _pem_key(serving_key))
    write_private(pki.service_account_key, _pem_key(sa_key))
    pki.service_account_public_key.write_bytes(
        sa_key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )
    return pki


@dataclass(frozen=True)
class IssuedCertificate:
    """A certificate and its key, as PEM files."""

    cert: Path
    key: Path


def issue(
    pki: ControlPlanePki,
    *,
    name: str,
    common_name: str,
    organizations: tuple[str, ...] = (),
    ips: tuple[str, ...] = (),
    dns_names: tuple[str, ...] = (),
) -> IssuedCertificate:
    """A certificate signed by the stack's CA: a client identity (CN = user, O = groups) and,
    with `ips`/`dns_names`, a serving certificate for those names. Written as <name>.crt/.key."""
    issued = IssuedCertificate(pki.directory / f"{name}.crt", pki.directory / f"{name}.key")
    if issued.key.exists():
        return issued
    ca_key = serialization.load_pem_private_key(pki.ca_key.read_bytes(), password=None)
    ca_cert = x509.load_pem_x509_certificate(pki.ca_cert.read_bytes())
    if not isinstance(ca_key, ec.EllipticCurvePrivateKey):
        raise TypeError(f"{pki.ca_key} is not the EC key this module writes")
    key = ec.generate_private_key(ec.SECP256R1())
    subject = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, o) for o in organizations]
    subject.append(x509.NameAttribute(NameOID.COMMON_NAME, common_name))
    now = datetime.now(UTC) - timedelta(minutes=5)
    builder = (
        x509.CertificateBuilder()
        .subject_name(x509.Name(subject))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now)
        .not_valid_after(now + VALIDITY)
    )
    alternative: list[x509.GeneralName] = [x509.DNSName(n) for n in dns_names]
    alternative += [x509.IPAddress(ipaddress.ip_address(ip)) for ip in ips]
    if alternative:
        builder = builder.add_extension(x509.SubjectAlternativeName(alternative), critical=False)
    cert = builder.sign(ca_key, hashes.SHA256())
    issued.cert.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    write_private(issued.key, _pem_key(key))
    return issued
