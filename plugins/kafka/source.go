package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"path"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/sasl"
	"github.com/segmentio/kafka-go/sasl/plain"
	"github.com/segmentio/kafka-go/sasl/scram"

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

// source is the Kafka DLQSource: a consumer-group reader over every topic
// matching the pattern (recreated when the matching set changes) and an
// acks=all writer for republishing.
type source struct {
	mu       sync.Mutex
	cfg      config
	refresh  time.Duration
	session  time.Duration
	dialer   *kafka.Dialer
	tr       *kafka.Transport
	reader   *kafka.Reader
	topics   []string
	writer   *kafka.Writer
	nextScan time.Time
	// For fresh writers on stale metadata (see Republish).
	mech         sasl.Mechanism
	tlsCfg       *tls.Config
	metadataWait time.Duration
	fetchMu      sync.Mutex // one Fetch at a time: the reader is not shared
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
	dialer := &kafka.Dialer{Timeout: 10 * time.Second, DualStack: true, SASLMechanism: mech, TLS: tlsCfg}
	tr := newTransport(mech, tlsCfg, 0)
	writer := newWriter(cfg, tr)
	s.mu.Lock()
	old, oldWriter := s.reader, s.writer
	s.cfg, s.refresh, s.session, s.dialer, s.tr, s.writer = cfg, refresh, session, dialer, tr, writer
	s.mech, s.tlsCfg, s.metadataWait = mech, tlsCfg, metadataWait
	s.reader, s.topics, s.nextScan = nil, nil, time.Time{}
	s.mu.Unlock()
	if old != nil {
		_ = old.Close()
	}
	if oldWriter != nil {
		_ = oldWriter.Close()
	}
	// Reachability: list topics now so that a wrong address fails here.
	if _, err := s.matchingTopics(ctx); err != nil {
		return nil, err
	}
	return &sdk.ConfigureResponse{PluginVersion: version}, nil
}

func security(cfg config) (sasl.Mechanism, *tls.Config, error) {
	var problems []sdk.FieldError
	var mech sasl.Mechanism
	if cfg.SASL != nil {
		var err error
		switch strings.ToLower(cfg.SASL.Mechanism) {
		case "plain":
			mech = plain.Mechanism{Username: cfg.SASL.Username, Password: cfg.SASL.Password}
		case "scram-sha-256":
			mech, err = scram.Mechanism(scram.SHA256, cfg.SASL.Username, cfg.SASL.Password)
		case "scram-sha-512":
			mech, err = scram.Mechanism(scram.SHA512, cfg.SASL.Username, cfg.SASL.Password)
		default:
			problems = append(problems, sdk.FieldError{Field: "sasl.mechanism", Problem: "must be plain, scram-sha-256 or scram-sha-512"})
		}
		if err != nil {
			problems = append(problems, sdk.FieldError{Field: "sasl", Problem: err.Error()})
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

// matchingTopics lists the broker's topics that match the pattern.
func (s *source) matchingTopics(ctx context.Context) ([]string, error) {
	s.mu.Lock()
	cfg, tr := s.cfg, s.tr
	s.mu.Unlock()
	client := &kafka.Client{Addr: kafka.TCP(cfg.Brokers...), Transport: tr, Timeout: 10 * time.Second}
	meta, err := client.Metadata(ctx, &kafka.MetadataRequest{})
	if err != nil {
		err = fmt.Errorf("list topics on %s: %w", strings.Join(cfg.Brokers, ","), err)
		if cfg.SASL != nil && (errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)) {
			// Brokers that refuse credentials may just hang up instead of
			// answering SASL_AUTHENTICATION_FAILED; say what it likely means.
			err = fmt.Errorf("%w (the broker closed the connection during SASL %s authentication: check sasl.username, the password and sasl.mechanism)",
				err, cfg.SASL.Mechanism)
		}
		return nil, classify(err)
	}
	var out []string
	for _, t := range meta.Topics {
		if t.Error != nil || t.Internal {
			continue
		}
		if ok, _ := path.Match(cfg.TopicPattern, t.Name); ok {
			out = append(out, t.Name)
		}
	}
	sort.Strings(out)
	return out, nil
}

// currentReader returns the reader, recreating it when the set of matching
// topics changed (new DLQ topics are picked up without a restart).
func (s *source) currentReader(ctx context.Context) (*kafka.Reader, error) {
	s.mu.Lock()
	due := time.Now().After(s.nextScan)
	r := s.reader
	s.mu.Unlock()
	if !due && r != nil {
		return r, nil
	}
	topics, err := s.matchingTopics(ctx)
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		s.nextScan = time.Now().Add(time.Second)
		if s.reader != nil {
			return s.reader, nil // keep consuming what we know
		}
		return nil, err
	}
	s.nextScan = time.Now().Add(s.refresh)
	if s.reader != nil && equal(topics, s.topics) {
		return s.reader, nil
	}
	if s.reader != nil {
		sdk.Logger().Info("dead-letter topics changed; rejoining the group", "topics", topics)
		_ = s.reader.Close()
		s.reader = nil
	}
	s.topics = topics
	if len(topics) == 0 {
		return nil, nil
	}
	start := kafka.FirstOffset
	if s.cfg.StartOffset == "latest" {
		start = kafka.LastOffset
	}
	s.reader = kafka.NewReader(kafka.ReaderConfig{
		Brokers:               s.cfg.Brokers,
		GroupID:               s.cfg.GroupID,
		GroupTopics:           topics,
		Dialer:                s.dialer,
		StartOffset:           start,
		CommitInterval:        0, // commit synchronously, and only when told
		MinBytes:              1,
		MaxBytes:              16 << 20,
		MaxWait:               250 * time.Millisecond,
		QueueCapacity:         10000,
		WatchPartitionChanges: true,
		HeartbeatInterval:     min(time.Second, s.session/3),
		SessionTimeout:        s.session,
		RebalanceTimeout:      s.session,
		ErrorLogger:           kafka.LoggerFunc(func(msg string, args ...any) { sdk.Logger().Warn(fmt.Sprintf(msg, args...)) }),
	})
	return s.reader, nil
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func (s *source) originalTopic(dlqTopic string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if t, ok := s.cfg.OriginalTopics[dlqTopic]; ok {
		return t
	}
	if s.cfg.DLQSuffix != "" && strings.HasSuffix(dlqTopic, s.cfg.DLQSuffix) {
		return strings.TrimSuffix(dlqTopic, s.cfg.DLQSuffix) + s.cfg.OriginalSuffix
	}
	return ""
}

// Fetch waits up to req.Wait for a first message, then takes what is
// already buffered, up to req.Max.
func (s *source) Fetch(ctx context.Context, req *sdk.FetchRequest) (*sdk.FetchResponse, error) {
	s.fetchMu.Lock()
	defer s.fetchMu.Unlock()
	r, err := s.currentReader(ctx)
	if err != nil {
		return nil, err
	}
	resp := &sdk.FetchResponse{}
	if r == nil {
		// No matching topic yet: wait, then report nothing.
		t := time.NewTimer(req.Wait)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
		}
		return resp, nil
	}
	wait := req.Wait
	for len(resp.Messages) < req.Max {
		fctx, cancel := context.WithTimeout(ctx, wait)
		m, err := r.FetchMessage(fctx)
		cancel()
		if err != nil {
			if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
				break
			}
			if len(resp.Messages) > 0 {
				break
			}
			return nil, classify(fmt.Errorf("fetch: %w", err))
		}
		resp.Messages = append(resp.Messages, toDeadLetter(m, s.originalTopic(m.Topic)))
		// After the first message, only take what is already there.
		wait = 2 * time.Millisecond
	}
	return resp, nil
}

func toDeadLetter(m kafka.Message, original string) sdk.DeadLetter {
	hs := make([]sdk.Header, len(m.Headers))
	for i, h := range m.Headers {
		hs[i] = sdk.Header{Key: []byte(h.Key), Value: h.Value}
	}
	return sdk.DeadLetter{
		Position:      sdk.Position{Topic: m.Topic, Partition: int32(m.Partition), Offset: m.Offset},
		Key:           m.Key,
		Headers:       hs,
		Value:         m.Value,
		Timestamp:     m.Time,
		OriginalTopic: original,
	}
}

// Commit commits the consumer group's offsets past these positions.
func (s *source) Commit(ctx context.Context, req *sdk.CommitRequest) (*sdk.CommitResponse, error) {
	s.mu.Lock()
	r := s.reader
	s.mu.Unlock()
	if r == nil || len(req.Positions) == 0 {
		return &sdk.CommitResponse{}, nil
	}
	msgs := make([]kafka.Message, len(req.Positions))
	for i, p := range req.Positions {
		msgs[i] = kafka.Message{Topic: p.Topic, Partition: int(p.Partition), Offset: p.Offset}
	}
	if err := r.CommitMessages(ctx, msgs...); err != nil {
		return nil, classify(fmt.Errorf("commit offsets: %w", err))
	}
	return &sdk.CommitResponse{}, nil
}
