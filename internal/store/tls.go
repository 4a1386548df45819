package store

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"

	"github.com/go-sql-driver/mysql"
)

// CAEnv names the file of the CA that MySQL's certificate must chain to
// (deploy/validate's MySQLCAEnv): set, a DSN with tls=true (or tls=flashsale)
// verifies the server against it alone rather than the system's roots.
const CAEnv = "FLASHSALE_MYSQL_CA_FILE"

// TLSName is the go-sql-driver TLS config registered from CAEnv's file.
const TLSName = "flashsale"

// registerTLS registers TLSName from the CA file CAEnv names and returns the
// file; "" when CAEnv is not set.
func registerTLS() (string, error) {
	file := os.Getenv(CAEnv)
	if file == "" {
		return "", nil
	}
	pem, err := os.ReadFile(file)
	if err != nil {
		return "", fmt.Errorf("store: %s: %w", CAEnv, err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(pem) {
		return "", fmt.Errorf("store: %s=%s holds no PEM certificate", CAEnv, file)
	}
	if err := mysql.RegisterTLSConfig(TLSName, &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}); err != nil {
		return "", fmt.Errorf("store: register the MySQL CA: %w", err)
	}
	return file, nil
}

// useTLS points a DSN asking for verified TLS (tls=true or tls=flashsale) at the
// CA of caFile; the driver names the server by the DSN's host.
func useTLS(cfg *mysql.Config, caFile string) error {
	switch cfg.TLSConfig {
	case TLSName:
		if caFile == "" {
			return errors.New("store: the dsn says tls=" + TLSName + " but " + CAEnv + " is not set")
		}
	case "true":
		if caFile != "" {
			cfg.TLSConfig, cfg.TLS = TLSName, nil
		}
	}
	return nil
}
