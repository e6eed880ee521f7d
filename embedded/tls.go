package embedded

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"slices"
	"time"
)

// The files of a bus's TLS, in its directory (mesh up --tls: HOME/tls). The
// CA is made once and kept: join strings pin it, so a new one would strand
// every agent. The server certificate is made again whenever it does not
// cover the names the bus is reached by, or nears its end.
const (
	CAFile     = "ca.pem"
	caKeyFile  = "ca-key.pem"
	certFile   = "server.pem"
	keyFile    = "server-key.pem"
	serverLife = 397 * 24 * time.Hour
	caLife     = 10 * 365 * 24 * time.Hour
)

// EnsureTLS makes (or finds) the bus's CA and a server certificate for
// hosts (names or addresses) in dir, and answers the server's TLS
// configuration, the CA's PEM, and what it did, to say.
func EnsureTLS(dir string, hosts []string) (*tls.Config, []byte, string, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, nil, "", fmt.Errorf("cannot keep the bus's TLS in %s: %w", dir, err)
	}
	ca, caKey, caPEM, made, err := loadOrMakeCA(dir)
	if err != nil {
		return nil, nil, "", err
	}
	said := "found the bus's CA in " + dir
	if made {
		said = "made the bus's CA in " + dir + " (join strings carry it from now on)"
	}
	cert, err := tls.LoadX509KeyPair(filepath.Join(dir, certFile), filepath.Join(dir, keyFile))
	if err != nil || !covers(cert, hosts) {
		if cert, err = issueServer(dir, ca, caKey, hosts); err != nil {
			return nil, nil, "", err
		}
		said += fmt.Sprintf("; issued a server certificate for %v", hosts)
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}, caPEM, said, nil
}

func loadOrMakeCA(dir string) (*x509.Certificate, *ecdsa.PrivateKey, []byte, bool, error) {
	caPEM, err1 := os.ReadFile(filepath.Join(dir, CAFile))
	keyPEM, err2 := os.ReadFile(filepath.Join(dir, caKeyFile))
	if err1 == nil && err2 == nil {
		pair, err := tls.X509KeyPair(caPEM, keyPEM)
		if err != nil {
			return nil, nil, nil, false, fmt.Errorf("the bus's CA in %s cannot be read (%v); join strings pin it, so restore it from a backup of the home", dir, err)
		}
		key, ok := pair.PrivateKey.(*ecdsa.PrivateKey)
		if !ok {
			return nil, nil, nil, false, fmt.Errorf("the bus's CA key in %s is not an ECDSA key", dir)
		}
		ca, err := x509.ParseCertificate(pair.Certificate[0])
		return ca, key, caPEM, false, err
	}
	if !errors.Is(err1, fs.ErrNotExist) || !errors.Is(err2, fs.ErrNotExist) {
		return nil, nil, nil, false, fmt.Errorf("the bus's CA in %s is half there (%v, %v); restore both files from a backup of the home", dir, err1, err2)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, nil, false, err
	}
	tmpl := &x509.Certificate{SerialNumber: serial(), Subject: pkix.Name{CommonName: "mesh bus CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(caLife),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageCRLSign, MaxPathLenZero: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, nil, false, err
	}
	caPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	if err := writePEM(dir, caKeyFile, "EC PRIVATE KEY", key); err != nil {
		return nil, nil, nil, false, err
	}
	if err := os.WriteFile(filepath.Join(dir, CAFile), caPEM, 0o644); err != nil {
		return nil, nil, nil, false, err
	}
	ca, err := x509.ParseCertificate(der)
	return ca, key, caPEM, true, err
}

func issueServer(dir string, ca *x509.Certificate, caKey *ecdsa.PrivateKey, hosts []string) (tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, err
	}
	tmpl := &x509.Certificate{SerialNumber: serial(), Subject: pkix.Name{CommonName: "mesh bus"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(serverLife),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return tls.Certificate{}, err
	}
	if err := writePEM(dir, keyFile, "EC PRIVATE KEY", key); err != nil {
		return tls.Certificate{}, err
	}
	if err := os.WriteFile(filepath.Join(dir, certFile), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		return tls.Certificate{}, err
	}
	return tls.LoadX509KeyPair(filepath.Join(dir, certFile), filepath.Join(dir, keyFile))
}

// covers: the certificate names every host and lives another month.
func covers(c tls.Certificate, hosts []string) bool {
	leaf, err := x509.ParseCertificate(c.Certificate[0])
	if err != nil || time.Until(leaf.NotAfter) < 30*24*time.Hour {
		return false
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			if !slices.ContainsFunc(leaf.IPAddresses, ip.Equal) {
				return false
			}
		} else if !slices.Contains(leaf.DNSNames, h) {
			return false
		}
	}
	return true
}

func writePEM(dir, name, typ string, key *ecdsa.PrivateKey) error {
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, name), pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600)
}

func serial() *big.Int {
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	return n
}
