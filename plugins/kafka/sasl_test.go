package main

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/lifecycled/lifecycled/internal/testsvc"
	"github.com/lifecycled/lifecycled/sdk"
	"github.com/lifecycled/lifecycled/sdk/plugintest"
)

// TestSASL runs intake and republish against brokers that only admit
// authenticated clients, and checks that bad credentials are refused at
// Configure with an error the operator can act on.
func TestSASL(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ kfake, config string }{
		{"PLAIN", "plain"},
		{"SCRAM-SHA-256", "scram-sha-256"},
		{"SCRAM-SHA-512", "scram-sha-512"},
	} {
		t.Run(tc.kfake, func(t *testing.T) {
			broker := testsvc.KafkaSASL(t, tc.kfake, "dlq", "s3cret")
			broker.CreateTopics(t, 1, "orders.dlq.v1", "orders.events.v1")
			producer := broker.Client(t)
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			require.NoError(t, producer.ProduceSync(ctx, &kgo.Record{Topic: "orders.dlq.v1", Value: []byte(`{"id":1}`)}).FirstErr())

			cfg := func(password string) map[string]any {
				return map[string]any{"brokers": []any{broker.Addr}, "group_id": "sasl", "refresh_interval": "1s", "session_timeout": "2s",
					"sasl": map[string]any{"mechanism": tc.config, "username": "dlq", "password": password}}
			}
			s := plugintest.Launch(t, binary(t), sdk.KindDLQSource).Source(t)
			_, err := s.Configure(ctx, &sdk.ConfigureRequest{Name: "kafka", Config: cfg("wrong")})
			require.Error(t, err, "wrong password accepted")
			require.Contains(t, err.Error(), "SASL", "the error names the cause: %v", err)
			require.NotContains(t, err.Error(), "wrong", "the password is not echoed")

			_, err = s.Configure(ctx, &sdk.ConfigureRequest{Name: "kafka", Config: cfg("s3cret")})
			require.NoError(t, err)
			var got []sdk.DeadLetter
			for len(got) == 0 && ctx.Err() == nil {
				resp, err := s.Fetch(ctx, &sdk.FetchRequest{Max: 10, Wait: time.Second})
				require.NoError(t, err)
				got = append(got, resp.Messages...)
			}
			require.Equal(t, `{"id":1}`, string(got[0].Value))
			_, err = s.Commit(ctx, &sdk.CommitRequest{Positions: []sdk.Position{got[0].Position}})
			require.NoError(t, err)
			resp, err := s.Republish(ctx, &sdk.RepublishRequest{Messages: []sdk.RepublishMessage{{ID: "1", Topic: "orders.events.v1", Value: got[0].Value}}})
			require.NoError(t, err)
			require.True(t, resp.Results[0].Acked, "%v", resp.Results[0].Err)
		})
	}
}
