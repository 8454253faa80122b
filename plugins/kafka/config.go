package main

import (
	"context"
	"fmt"
	"net"
	"path"
	"time"

	"github.com/lifecycled/lifecycled/sdk"
)

const version = "1.0.0"

type tlsConfig struct {
	Enabled            bool   `json:"enabled"`
	CA                 string `json:"ca"`   // PEM; from ca_file
	Cert               string `json:"cert"` // PEM; from cert_file
	Key                string `json:"key"`  // PEM; from key_file
	InsecureSkipVerify bool   `json:"insecure_skip_verify"`
	ServerName         string `json:"server_name"`
}

type saslConfig struct {
	Mechanism string `json:"mechanism"` // plain, scram-sha-256, scram-sha-512
	Username  string `json:"username"`
	Password  string `json:"password"` // from password_file
}

type config struct {
	Brokers         []string          `json:"brokers"`
	TopicPattern    string            `json:"topic_pattern"`
	GroupID         string            `json:"group_id"`
	RefreshInterval string            `json:"refresh_interval"`
	StartOffset     string            `json:"start_offset"`
	SessionTimeout  string            `json:"session_timeout"`
	OriginalTopics  map[string]string `json:"original_topics"`
	DLQSuffix       string            `json:"dlq_suffix"`
	OriginalSuffix  string            `json:"original_suffix"`
	TLS             *tlsConfig        `json:"tls"`
	SASL            *saslConfig       `json:"sasl"`
	// MaxMessageBytes is the broker's max.message.bytes: record batches stay
	// below it, and a message larger than it fails alone, permanently.
	MaxMessageBytes int `json:"max_message_bytes"`
	// MetadataWait is how long a republish to a topic the broker does not
	// know yet, or to a partition without a leader, is retried with fresh
	// metadata before it counts as failed.
	MetadataWait string `json:"metadata_wait"`
}

func (s *source) Configure(ctx context.Context, req *sdk.ConfigureRequest) (*sdk.ConfigureResponse, error) {
	cfg := config{TopicPattern: "*.dlq.v1", GroupID: "dlq-manager.default", RefreshInterval: "30s", StartOffset: "earliest", SessionTimeout: "10s",
		DLQSuffix: ".dlq.v1", OriginalSuffix: ".events.v1", MaxMessageBytes: defaultMaxMessageBytes, MetadataWait: "10s"}
	if err := sdk.DecodeConfig(req.Config, &cfg); err != nil {
		return nil, err
	}
	var problems []sdk.FieldError
	if len(cfg.Brokers) == 0 {
		problems = append(problems, sdk.FieldError{Field: "brokers", Problem: `required, e.g. ["kafka-1:9092"]`})
	}
	for i, b := range cfg.Brokers {
		if _, _, err := net.SplitHostPort(b); err != nil {
			problems = append(problems, sdk.FieldError{Field: fmt.Sprintf("brokers[%d]", i), Problem: "must be host:port"})
		}
	}
	if _, err := path.Match(cfg.TopicPattern, "x"); err != nil || cfg.TopicPattern == "" {
		problems = append(problems, sdk.FieldError{Field: "topic_pattern", Problem: "must be a glob such as *.dlq.v1"})
	}
	if cfg.GroupID == "" {
		problems = append(problems, sdk.FieldError{Field: "group_id", Problem: "must not be empty"})
	}
	refresh, err := time.ParseDuration(cfg.RefreshInterval)
	if err != nil || refresh < time.Second {
		problems = append(problems, sdk.FieldError{Field: "refresh_interval", Problem: "must be a duration of at least 1s"})
	}
	// A dead daemon's partitions move to the others after this long.
	session, err := time.ParseDuration(cfg.SessionTimeout)
	if err != nil || session < time.Second {
		problems = append(problems, sdk.FieldError{Field: "session_timeout", Problem: "must be a duration of at least 1s"})
	}
	if cfg.MaxMessageBytes < 1024 || cfg.MaxMessageBytes > 1<<30 {
		problems = append(problems, sdk.FieldError{Field: "max_message_bytes", Problem: "must be between 1024 and 1073741824 (the broker's max.message.bytes)"})
	}
	metadataWait, err := time.ParseDuration(cfg.MetadataWait)
	if err != nil || metadataWait < 0 || metadataWait > 10*time.Minute {
		problems = append(problems, sdk.FieldError{Field: "metadata_wait", Problem: "must be a duration between 0s and 10m"})
	}
	if cfg.StartOffset != "earliest" && cfg.StartOffset != "latest" {
		problems = append(problems, sdk.FieldError{Field: "start_offset", Problem: `must be "earliest" or "latest"`})
	}
	mech, tlsCfg, err := security(cfg)
	if err != nil {
		problems = append(problems, err.(*sdk.Error).Fields...)
	}
	if len(problems) > 0 {
		return nil, sdk.InvalidConfig(problems...)
	}
	conn := connection(cfg, mech, tlsCfg)
	producer, err := newProducer(conn, cfg, metadataWait)
	if err != nil {
		return nil, sdk.InvalidConfig(sdk.FieldError{Field: "brokers", Problem: err.Error()})
	}
	s.mu.Lock()
	oldConsumer, oldProducer := s.consumer, s.producer
	s.cfg, s.refresh, s.session, s.metadataWait, s.conn, s.producer = cfg, refresh, session, metadataWait, conn, producer
	s.consumer, s.topics, s.nextScan = nil, nil, time.Time{}
	s.mu.Unlock()
	if oldConsumer != nil {
		oldConsumer.Close()
	}
	if oldProducer != nil {
		oldProducer.Close()
	}
	// Reachability: list topics now so that a wrong address fails here.
	if _, err := s.matchingTopics(ctx); err != nil {
		return nil, err
	}
	// Offsets: a commit covers every earlier offset of its partition; a
	// record has the same offset on every delivery; headers are a list.
	return &sdk.ConfigureResponse{PluginVersion: version,
		Source: sdk.SourceTraits{Acks: sdk.AcksCumulative, Positions: sdk.PositionsStable, HeaderOrderKept: true}}, nil
}
