#!/usr/bin/env bash
# Remakes the sample listener identity with the openssl CLI:
#   listener-cert-pkey.p12      certificate + private key (PKCS#12, password in listener-cert-pkey.password)
#   listener-pinned-cert.cer    the same certificate, DER, for `ferry sync --pin`
# The certificate is self-signed with CA:TRUE so it can also serve as its own trust root.
set -euo pipefail
cd "$(dirname "$0")"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
password=$(cat listener-cert-pkey.password 2>/dev/null || echo password)
printf '%s\n' "$password" > listener-cert-pkey.password
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 3650 \
  -subj "/CN=ferry-sample-listener/O=ferry samples" \
  -addext "subjectAltName=DNS:localhost,IP:127.0.0.1" \
  -addext "basicConstraints=critical,CA:TRUE" \
  -addext "keyUsage=critical,digitalSignature,keyCertSign" \
  -addext "extendedKeyUsage=serverAuth,clientAuth" \
  -keyout "$work/key.pem" -out "$work/cert.pem" 2>/dev/null
openssl pkcs12 -export -inkey "$work/key.pem" -in "$work/cert.pem" -name ferry-sample-listener \
  -passout "pass:$password" -out listener-cert-pkey.p12
openssl x509 -in "$work/cert.pem" -outform DER -out listener-pinned-cert.cer
openssl x509 -in listener-pinned-cert.cer -inform DER -noout -subject -enddate -fingerprint -sha256
