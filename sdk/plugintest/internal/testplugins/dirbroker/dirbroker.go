// Package dirbroker is a message broker kept in a directory, for the kit's
// own tests of its dead-letter source checks: a topic is a directory, a
// message a file named by its sequence number, and a committed position a
// file beside the topic's. The test source plugin (dirsource) reads it as
// a broker's client would, and the kit's fixture writes and reads it as
// the broker's own tools would.
package dirbroker

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// Header is one header; Value nil is a null value.
type Header struct {
	Key   []byte `json:"key"`
	Value []byte `json:"value"`
}

// Message is one message as the broker keeps it.
type Message struct {
	Key     []byte   `json:"key"`
	Value   []byte   `json:"value"`
	Headers []Header `json:"headers"`
}

// Stored is a message with its sequence number in its topic.
type Stored struct {
	Seq int64
	Message
}

// ErrNoTopic is an append to a topic that does not exist.
var ErrNoTopic = errors.New("no such topic")

// Broker is the directory.
type Broker struct{ Dir string }

func (b Broker) topicDir(topic string) string { return filepath.Join(b.Dir, url.PathEscape(topic)) }

// CreateTopic makes topic exist.
func (b Broker) CreateTopic(topic string) error { return os.MkdirAll(b.topicDir(topic), 0o755) }

// Append adds msgs to topic, in order, and returns their sequence numbers.
func (b Broker) Append(topic string, msgs ...Message) ([]int64, error) {
	dir := b.topicDir(topic)
	if _, err := os.Stat(dir); err != nil {
		return nil, fmt.Errorf("%w: %s", ErrNoTopic, topic)
	}
	all, err := b.Read(topic, 0, -1)
	if err != nil {
		return nil, err
	}
	next := int64(1)
	if len(all) > 0 {
		next = all[len(all)-1].Seq + 1
	}
	var seqs []int64
	for _, m := range msgs {
		data, err := json.Marshal(m)
		if err != nil {
			return nil, err
		}
		name := filepath.Join(dir, fmt.Sprintf("%020d.msg", next))
		if err := writeAtomic(name, data); err != nil {
			return nil, err
		}
		seqs = append(seqs, next)
		next++
	}
	return seqs, nil
}

// Read returns up to max messages of topic after sequence number after
// (max < 0: all), in order.
func (b Broker) Read(topic string, after int64, max int) ([]Stored, error) {
	entries, err := os.ReadDir(b.topicDir(topic))
	if err != nil {
		return nil, err
	}
	var seqs []int64
	for _, e := range entries {
		s, ok := strings.CutSuffix(e.Name(), ".msg")
		if !ok {
			continue
		}
		if seq, err := strconv.ParseInt(s, 10, 64); err == nil && seq > after {
			seqs = append(seqs, seq)
		}
	}
	sort.Slice(seqs, func(i, j int) bool { return seqs[i] < seqs[j] })
	if max >= 0 && len(seqs) > max {
		seqs = seqs[:max]
	}
	out := make([]Stored, 0, len(seqs))
	for _, seq := range seqs {
		data, err := os.ReadFile(filepath.Join(b.topicDir(topic), fmt.Sprintf("%020d.msg", seq)))
		if err != nil {
			return nil, err
		}
		s := Stored{Seq: seq}
		if err := json.Unmarshal(data, &s.Message); err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

// Committed is the last sequence number of topic committed (0: none).
func (b Broker) Committed(topic string) (int64, error) {
	data, err := os.ReadFile(b.topicDir(topic) + ".committed")
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(strings.TrimSpace(string(data)), 10, 64)
}

// Commit records seq as topic's last committed sequence number, unless a
// later one is committed already: commits are cumulative, as Kafka's.
func (b Broker) Commit(topic string, seq int64) error {
	cur, err := b.Committed(topic)
	if err != nil || seq <= cur {
		return err
	}
	return writeAtomic(b.topicDir(topic)+".committed", []byte(strconv.FormatInt(seq, 10)))
}

func writeAtomic(name string, data []byte) error {
	tmp := name + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, name)
}
