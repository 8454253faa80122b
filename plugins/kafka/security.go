package main

import (
	"crypto/tls"
	"crypto/x509"
	"strings"

	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/lifecycled/lifecycled/sdk"
)

func security(cfg config) (sasl.Mechanism, *tls.Config, error) {
	var problems []sdk.FieldError
	var mech sasl.Mechanism
	if cfg.SASL != nil {
		switch strings.ToLower(cfg.SASL.Mechanism) {
		case "plain":
			mech = plain.Auth{User: cfg.SASL.Username, Pass: cfg.SASL.Password}.AsMechanism()
		case "scram-sha-256":
			mech = scram.Auth{User: cfg.SASL.Username, Pass: cfg.SASL.Password}.AsSha256Mechanism()
		case "scram-sha-512":
			mech = scram.Auth{User: cfg.SASL.Username, Pass: cfg.SASL.Password}.AsSha512Mechanism()
		default:
			problems = append(problems, sdk.FieldError{Field: "sasl.mechanism", Problem: "must be plain, scram-sha-256 or scram-sha-512"})
		}
		if cfg.SASL.Username == "" {
			problems = append(problems, sdk.FieldError{Field: "sasl.username", Problem: "required"})
		}
	}
	var tlsCfg *tls.Config
	if cfg.TLS != nil && cfg.TLS.Enabled {
		tlsCfg = &tls.Config{MinVersion: tls.VersionTLS12, InsecureSkipVerify: cfg.TLS.InsecureSkipVerify, ServerName: cfg.TLS.ServerName}
		if cfg.TLS.CA != "" {
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM([]byte(cfg.TLS.CA)) {
				problems = append(problems, sdk.FieldError{Field: "tls.ca", Problem: "no PEM certificate found"})
			}
			tlsCfg.RootCAs = pool
		}
		if cfg.TLS.Cert != "" || cfg.TLS.Key != "" {
			cert, err := tls.X509KeyPair([]byte(cfg.TLS.Cert), []byte(cfg.TLS.Key))
			if err != nil {
				problems = append(problems, sdk.FieldError{Field: "tls.cert", Problem: "cert and key do not form a key pair"})
			}
			tlsCfg.Certificates = []tls.Certificate{cert}
		}
	}
	if len(problems) > 0 {
		return nil, nil, sdk.InvalidConfig(problems...)
	}
	return mech, tlsCfg, nil
}
