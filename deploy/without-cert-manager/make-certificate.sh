#!/bin/sh
# Make the files this overlay puts in the gpulint-webhook-tls Secret: a CA (ca.crt, ca.key)
# and a serving certificate for the webhook's Service signed by it (tls.crt, tls.key).
# Run it here, then: kubectl apply -k .   Run it again (and apply) before tls.crt expires:
# gpulint reloads the new pair without a restart.
#   DAYS=365 sh make-certificate.sh
set -eu
cd "$(dirname "$0")"
SERVICE=gpulint-webhook
NAMESPACE=gpulint
DAYS="${DAYS:-365}"
EXT="$(mktemp)"
trap 'rm -f "$EXT" tls.csr' EXIT

if [ ! -f ca.key ]; then
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
        -days 3650 -subj "/CN=gpulint webhook CA" \
        -addext "basicConstraints=critical,CA:TRUE" \
        -addext "keyUsage=critical,keyCertSign,cRLSign" \
        -keyout ca.key -out ca.crt 2>/dev/null
fi
cat > "$EXT" <<EXT
basicConstraints=critical,CA:FALSE
keyUsage=critical,digitalSignature
extendedKeyUsage=serverAuth
subjectAltName=DNS:$SERVICE.$NAMESPACE.svc,DNS:$SERVICE.$NAMESPACE.svc.cluster.local
EXT
openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
    -subj "/CN=$SERVICE.$NAMESPACE.svc" -keyout tls.key -out tls.csr 2>/dev/null
openssl x509 -req -in tls.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days "$DAYS" \
    -extfile "$EXT" -out tls.crt 2>/dev/null
chmod 600 ca.key tls.key
echo "wrote tls.crt, tls.key (valid $DAYS days) and ca.crt in $(pwd)"
