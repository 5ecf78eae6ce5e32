#!/usr/bin/env bash
# Makes the private CA and the certificates the TLS tests use, in test/fixtures/tls/. Run once; the
# files are checked in, so tests never need openssl. They are long-lived (100 years) except
# `expired.pem`, whose validity ended in 2020. Every key is ECDSA P-256 except `default`'s (RSA 2048,
# so both key types are served). Nothing here is secret: these keys must never protect anything real.
#
#   ca.pem / ca.key               "ini-proxy test CA", the trust root the tests pass as tls_ca
#   other-ca.pem / other-ca.key   an unrelated CA: certificates it signs are "unknown CA"
#   exact.pem                     exact.test                     (SNI: the exact pair)
#   wildcard.pem                  *.wild.test, wild.test         (SNI: the wildcard pair)
#   default.pem                   default.test, CN only          (the first pair: the default)
#   exact-renewed.pem             exact.test again, a new serial (hot reload of a renewed certificate)
#   localhost.pem                 localhost, 127.0.0.1, ::1      (https upstreams on loopback)
#   wrong-name.pem                elsewhere.test                 (upstream name mismatch)
#   expired.pem                   localhost, 2020-01-01..2020-06-01 (expired)
#   unknown-ca.pem                localhost, signed by other-ca  (unknown CA)
#   client.pem                    "test client", clientAuth      (mutual TLS)
#   mismatch.key                  a key that belongs to no certificate
# Each NAME.pem has its key in NAME.key.
set -euo pipefail
cd "$(dirname "$0")/../test/fixtures"
mkdir -p tls
cd tls
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
days=36500

ec_key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1" 2>/dev/null; }

make_ca() { # NAME SUBJECT
  ec_key "$1.key"
  openssl req -x509 -new -key "$1.key" -subj "/CN=$2" -days "$days" -sha256 \
    -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" -out "$1.pem"
}

sign() { # NAME CA SUBJECT EXTENSIONS [KEYTYPE]
  local name=$1 ca=$2 subject=$3 extensions=$4
  if [[ "${5:-ec}" == rsa ]]; then openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out "$name.key" 2>/dev/null; else ec_key "$name.key"; fi
  openssl req -new -key "$name.key" -subj "$subject" -out "$work/$name.csr"
  printf '%s\n' "$extensions" > "$work/$name.ext"
  openssl x509 -req -in "$work/$name.csr" -CA "$ca.pem" -CAkey "$ca.key" -set_serial "0x$(openssl rand -hex 16)" \
    -days "$days" -sha256 -extfile "$work/$name.ext" -out "$name.pem" 2>/dev/null
}

server_ext() { printf 'basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth\nsubjectAltName=%s' "$1"; }

make_ca ca "ini-proxy test CA"
make_ca other-ca "ini-proxy unrelated CA"
sign exact ca "/CN=exact.test" "$(server_ext DNS:exact.test)"
sign exact-renewed ca "/CN=exact.test" "$(server_ext DNS:exact.test)"
sign wildcard ca "/CN=*.wild.test" "$(server_ext 'DNS:*.wild.test,DNS:wild.test')"
sign default ca "/CN=default.test" "$(printf 'basicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth')" rsa
sign localhost ca "/CN=localhost" "$(server_ext 'DNS:localhost,IP:127.0.0.1,IP:::1')"
sign wrong-name ca "/CN=elsewhere.test" "$(server_ext DNS:elsewhere.test)"
sign unknown-ca other-ca "/CN=localhost" "$(server_ext 'DNS:localhost,IP:127.0.0.1,IP:::1')"
sign client ca "/CN=test client" "$(printf 'basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=clientAuth')"
ec_key mismatch.key

# expired.pem: `openssl x509 -req` cannot set dates in the past; `openssl ca` can.
ec_key expired.key
openssl req -new -key expired.key -subj "/CN=localhost" -out "$work/expired.csr"
mkdir -p "$work/ca"
touch "$work/ca/index.txt"
cat > "$work/ca.cnf" <<EOF
[ca]
default_ca = test
[test]
database = $work/ca/index.txt
new_certs_dir = $work/ca
serial = $work/ca/serial
default_md = sha256
policy = anything
copy_extensions = none
[anything]
commonName = supplied
[server]
$(server_ext 'DNS:localhost,IP:127.0.0.1,IP:::1')
EOF
openssl rand -hex 16 > "$work/ca/serial"
openssl ca -batch -config "$work/ca.cnf" -cert ca.pem -keyfile ca.key -in "$work/expired.csr" -extensions server \
  -startdate 20200101000000Z -enddate 20200601000000Z -notext -out expired.pem 2>/dev/null

chmod 600 ./*.key
ls -1
