package compat

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// scramTLSEnv is what tests/compat/test_scram_tls_clients.py passes to the SASL_SSL tests:
// the SASL_SSL listener's address, the CA certificate file (PEM) and a SCRAM user holding
// both SCRAM-SHA-256 and SCRAM-SHA-512 credentials. These tests are not run by
// test_go_clients.py (its broker has no SASL_SSL listener).
func scramTLSEnv(t *testing.T) (addr, caFile, user, pass string) {
	t.Helper()
	addr, caFile = os.Getenv("SLUICE_SASL_SSL_BOOTSTRAP"), os.Getenv("SLUICE_CA")
	user, pass = os.Getenv("SLUICE_SCRAM_USER"), os.Getenv("SLUICE_SCRAM_PASSWORD")
	if addr == "" || caFile == "" || user == "" || pass == "" {
		t.Skip("SLUICE_SASL_SSL_BOOTSTRAP, SLUICE_CA, SLUICE_SCRAM_USER, SLUICE_SCRAM_PASSWORD " +
			"are not set: run through tests/compat/test_scram_tls_clients.py")
	}
	return addr, caFile, user, pass
}

func trustingTLS(t *testing.T, caFile string) *tls.Config {
	t.Helper()
	pem, err := os.ReadFile(caFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		t.Fatalf("no certificate in %s", caFile)
	}
	return &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
}

// franz-go over SASL_SSL (KIP-84): with each SCRAM mechanism a topic is created, records
// produced and consumed back; a wrong password is refused with SASL_AUTHENTICATION_FAILED.
func TestFranzScramOverTLS(t *testing.T) {
	addr, caFile, user, pass := scramTLSEnv(t)
	tlsCfg := trustingTLS(t, caFile)
	mechanisms := map[string]func(scram.Auth) sasl.Mechanism{
		"SCRAM-SHA-256": scram.Auth.AsSha256Mechanism,
		"SCRAM-SHA-512": scram.Auth.AsSha512Mechanism,
	}
	for name, mechanism := range mechanisms {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*waitFor)
			defer cancel()
			topic := "franz-scram-tls-" + name
			auth := kgo.SASL(mechanism(scram.Auth{User: user, Pass: pass}))
			opts := []kgo.Opt{kgo.SeedBrokers(addr), kgo.DialTLSConfig(tlsCfg), auth}
			cl, err := kgo.NewClient(append(opts, kgo.DefaultProduceTopic(topic),
				kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))...)
			if err != nil {
				t.Fatal(err)
			}
			defer cl.Close()
			created, err := kadm.NewClient(cl).CreateTopics(ctx, 1, 1, nil, topic)
			if err != nil || created[topic].Err != nil {
				t.Fatalf("create topic: %v %v", err, created[topic].Err)
			}
			const n = 5
			var recs []*kgo.Record
			for i := 0; i < n; i++ {
				recs = append(recs, &kgo.Record{Value: []byte(fmt.Sprintf("%d", i))})
			}
			if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
				t.Fatalf("produce: %v", err)
			}
			var got []string
			for len(got) < n && ctx.Err() == nil {
				fetches := cl.PollFetches(ctx)
				if errs := fetches.Errors(); len(errs) > 0 {
					t.Fatalf("poll: %v", errs)
				}
				fetches.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
			}
			if fmt.Sprint(got) != "[0 1 2 3 4]" {
				t.Fatalf("consumed %v, want [0 1 2 3 4]", got)
			}

			wrong, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DialTLSConfig(tlsCfg),
				kgo.SASL(mechanism(scram.Auth{User: user, Pass: "wrong"})))
			if err != nil {
				t.Fatal(err)
			}
			defer wrong.Close()
			pingCtx, pingCancel := context.WithTimeout(ctx, 10*time.Second)
			defer pingCancel()
			if err := wrong.Ping(pingCtx); !errors.Is(err, kerr.SaslAuthenticationFailed) {
				t.Fatalf("wrong password: got %v, want SASL_AUTHENTICATION_FAILED", err)
			}
		})
	}
}
