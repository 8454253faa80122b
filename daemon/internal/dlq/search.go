package dlq

import (
	"context"
	"time"

	"github.com/google/uuid"
)

// Search across topics and failure groups: what GET /api/v1/dlq/messages
// and GET /api/v1/dlq/groups ask of the store.

// HeaderFilter matches messages with a header named Name (exactly, as
// Kafka compares header keys) and, when Value is not nil, that value.
type HeaderFilter struct {
	Name  string
	Value *string
}

// SearchCursor is where a page ends: the next page starts after it in the
// order of the search.
type SearchCursor struct {
	CreatedAt time.Time
	ID        uuid.UUID
}

// SearchFilter selects dead letters across topics. Every field that is
// set must match.
type SearchFilter struct {
	Topic    string   // the DLQ topic or the original topic
	Statuses []Status // any of these; empty: every status
	Error    string   // substring of the error text, case ignored
	Group    string   // failure group id
	// ErrorGroup is an error group id (ErrorGroupID): any of its failure
	// groups.
	ErrorGroup string
	Key        *string // the exact key (as UTF-8 bytes)
	Headers    []HeaderFilter
	Text       string // substring of the payload, case ignored
	Since      *time.Time
	Until      *time.Time // created before this
	// IncludeArchived searches the archive too (Message.Archived).
	IncludeArchived bool
	OldestFirst     bool
	After           *SearchCursor
	Limit           int
}

// SearchPage is one page of a search.
type SearchPage struct {
	Messages []Message
	// Next is the cursor of the next page; nil on the last one.
	Next *SearchCursor
	// Total is how many messages match the filter (not the page); an
	// estimate when TotalIsEstimate.
	Total           int64
	TotalIsEstimate bool
}

// GroupSort orders the groups list.
type GroupSort string

// Group orders: most messages first, or most recently seen first.
const (
	GroupsByCount  GroupSort = "count"
	GroupsByRecent GroupSort = "recent"
)

// GroupBy is what the groups list gathers messages by.
type GroupBy string

// Failure groups (the original topic, the exception class and the
// normalised error text), or error groups (the normalised error text alone,
// across original topics, exception classes and sources).
const (
	GroupByFailure GroupBy = "failure"
	GroupByError   GroupBy = "error"
)

// GroupFilter selects failure groups.
type GroupFilter struct {
	Topic    string   // DLQ topic or original topic
	Statuses []Status // count only these; a group with none of them is left out
	Sort     GroupSort
	By       GroupBy // "" is GroupByFailure
	Limit    int
	// Now ends the arrivals window (ArrivalHours hourly buckets, the last
	// one the current hour); zero: no arrivals are counted.
	Now time.Time
}

// ArrivalHours is how many hours of arrivals a group summary counts.
const ArrivalHours = 24

// ArrivalsSince is where the arrivals window of now starts: the start of
// the hour ArrivalHours-1 hours before now's.
func ArrivalsSince(now time.Time) time.Time {
	return now.UTC().Truncate(time.Hour).Add(-(ArrivalHours - 1) * time.Hour)
}

// GroupSummary is one failure group with its live messages counted.
type GroupSummary struct {
	Group
	// What the group spans: its failure groups (a failure group: itself),
	// and their exception classes ("" left out). By error (GroupByError),
	// ID and ErrorGroup are the error group's, ExceptionClass is empty.
	Members          []string
	ExceptionClasses []string
	// Arrivals are its live messages taken in per hour, oldest first, over
	// the ArrivalHours hours that end with the current one
	// (from ArrivalsFrom, ArrivalsSince(GroupFilter.Now)); nil without
	// GroupFilter.Now.
	Arrivals       []int64
	ArrivalsFrom   time.Time
	SampleError    string
	OriginalTopics []string
	DLQTopics      []string
	Counts         map[Status]int64
	FirstSeen      time.Time
	LastSeen       time.Time
}

// SearchStore is what search and failure groups need from the state store.
type SearchStore interface {
	SearchDLQ(ctx context.Context, f SearchFilter) (SearchPage, error)
	DLQGroups(ctx context.Context, f GroupFilter) ([]GroupSummary, error)
	// BackfillDLQGroups gives up to limit messages stored before failure
	// groups existed their group; it returns how many it did (0: none left).
	BackfillDLQGroups(ctx context.Context, limit int) (int, error)
	// DLQTopicActivity says when each DLQ topic's live messages were taken
	// in: the window of arrivals ends with now's hour.
	DLQTopicActivity(ctx context.Context, now time.Time) (map[string]TopicActivity, error)
}

// TopicActivity is when a DLQ topic's live messages were taken in: the
// oldest and newest of them, and how many per hour over the ArrivalHours
// hours that end with the current one (from ArrivalsFrom), oldest first.
type TopicActivity struct {
	FirstSeen    time.Time
	LastSeen     time.Time
	Arrivals     []int64
	ArrivalsFrom time.Time
}

// TopicActivities are the topics' activity over one window: From is its
// first hour, which a topic without live messages has too (its hours are
// all zero).
type TopicActivities struct {
	From    time.Time
	ByTopic map[string]TopicActivity
}

// Of is topic's activity: none taken in over the window when the store
// saw no live message of it.
func (a TopicActivities) Of(topic string) TopicActivity {
	if t, ok := a.ByTopic[topic]; ok {
		return t
	}
	return TopicActivity{Arrivals: make([]int64, ArrivalHours), ArrivalsFrom: a.From}
}

// TopicActivity says when each DLQ topic's live messages were taken in.
func (s *Service) TopicActivity(ctx context.Context) (TopicActivities, error) {
	now := s.now()
	by, err := s.store.DLQTopicActivity(ctx, now)
	return TopicActivities{From: ArrivalsSince(now), ByTopic: by}, err
}

// Search finds dead letters across topics.
func (s *Service) Search(ctx context.Context, f SearchFilter) (SearchPage, error) {
	return s.store.SearchDLQ(ctx, f)
}

// Groups lists failure groups.
func (s *Service) Groups(ctx context.Context, f GroupFilter) ([]GroupSummary, error) {
	f.Now = s.now()
	return s.store.DLQGroups(ctx, f)
}

// backfillBatch is how many old messages one retry-loop pass groups: small
// enough that a pass stays short, so a million old rows take a thousand
// passes in the background rather than a long start.
const backfillBatch = 1000

// backfillGroups gives one batch of messages stored before failure groups
// existed their group (the lazy part of migration 010/008).
func (s *Service) backfillGroups(ctx context.Context) error {
	n, err := s.store.BackfillDLQGroups(ctx, backfillBatch)
	if err == nil && n > 0 {
		s.log.Info("gave failure groups to messages stored before they existed", "count", n)
	}
	return err
}
