#!/usr/bin/env bash
# Make a private CA and the certificates a secured Rockafka node and its clients use, with openssl:
#   ca.crt / ca.key          the CA (tlsServerTrustCertPath; clients trust it)
#   server.crt / server.key  the node (tlsServerCertPath / tlsServerKeyPath), for 127.0.0.1,
#                            localhost and the names/addresses given with -n
#   <user>.crt / <user>.key  a client certificate per user given with -u (subject DN CN=<user>,O=rockafka),
#                            e.g. for `rockafka admin --tls --cert admin.crt --key admin.key`
# Usage: deploy/dev/make-certs.sh [-d DIR] [-n NAME_OR_IP]... [-u USER]...   (default DIR ./certs)
# Keys are written 0600. For development and tests: a production CA keeps its key offline.
set -euo pipefail
dir=certs; names=(); users=()
while getopts "d:n:u:h" opt; do
  case "$opt" in
    d) dir=$OPTARG ;;
    n) names+=("$OPTARG") ;;
    u) users+=("$OPTARG") ;;
    *) sed -n '2,10p' "$0"; exit 2 ;;
  esac
done
command -v openssl >/dev/null || { echo "make-certs.sh: openssl is needed (apt-get install openssl)" >&2; exit 1; }
mkdir -p "$dir"
umask 077
days=825
if [ ! -s "$dir/ca.key" ]; then
  openssl req -x509 -newkey rsa:2048 -nodes -sha256 -days "$days" -subj "/CN=rockafka dev CA/O=rockafka" \
    -keyout "$dir/ca.key" -out "$dir/ca.crt" 2>/dev/null
fi
san="DNS:localhost,IP:127.0.0.1"
for n in "${names[@]+"${names[@]}"}"; do
  if [[ $n =~ ^[0-9.]+$ || $n == *:* ]]; then san+=",IP:$n"; else san+=",DNS:$n"; fi
done
sign() {  # sign NAME SUBJECT EXTENSIONS
  openssl req -new -newkey rsa:2048 -nodes -sha256 -subj "$2" -keyout "$dir/$1.key" -out "$dir/$1.csr" 2>/dev/null
  printf '%s\n' "$3" > "$dir/$1.ext"
  openssl x509 -req -in "$dir/$1.csr" -CA "$dir/ca.crt" -CAkey "$dir/ca.key" -CAcreateserial -days "$days" \
    -sha256 -extfile "$dir/$1.ext" -out "$dir/$1.crt" 2>/dev/null
  rm -f "$dir/$1.csr" "$dir/$1.ext"
}
sign server "/O=rockafka/CN=${names[0]:-localhost}" \
  "subjectAltName=$san
extendedKeyUsage=serverAuth,clientAuth
keyUsage=digitalSignature,keyEncipherment"
for u in "${users[@]+"${users[@]}"}"; do
  sign "$u" "/O=rockafka/CN=$u" "extendedKeyUsage=clientAuth
keyUsage=digitalSignature,keyEncipherment"
done
chmod 644 "$dir"/*.crt
echo "certificates in $dir: ca.crt server.crt${users[*]+ ${users[*]/%/.crt}}"
