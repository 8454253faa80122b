package store_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/lifecycled/lifecycled/daemon/internal/dlq"
	"github.com/lifecycled/lifecycled/daemon/internal/store"
	"github.com/lifecycled/lifecycled/daemon/internal/store/storetest"
)

// textFilters are the error= and q= searches every state of the index must
// answer alike: selective and broad, short (checked row by row), case,
// non-ASCII, LIKE metacharacters, text after a NUL byte, binary payloads,
// combined with other filters.
var textFilters = map[string]dlq.SearchFilter{
	"q one order":          {Text: "ord-0012"},
	"q every order":        {Text: "ORD-00"},
	"q mixed case":         {Text: "mixed case 100% _under_"},
	"q non-ascii":          {Text: "Überweisung 29"},
	"q binary":             {Text: "binary"},
	"q after NUL":          {Text: "after-nul"},
	"q short":              {Text: "19"},
	"q metacharacters":     {Text: "100%x"},
	"q nothing":            {Text: "no such text anywhere"},
	"q and topic":          {Text: "ord-001", Topic: "orders.events.v1"},
	"q and status":         {Text: "ord-001", Statuses: []dlq.Status{dlq.StatusPending}},
	"error selective":      {Error: "10.0.0.12:"},
	"error broad":          {Error: "CONNECTION REFUSED"},
	"error and q":          {Error: "duplicate", Text: "ord-001"},
	"error percent":        {Error: "100%"},
	"q archived too":       {Text: "ORD-000", IncludeArchived: true},
	"q oldest first paged": {Text: "ORD-00", OldestFirst: true, Limit: 4},
	// SQLite's LIKE stops reading its pattern at a NUL, which made these
	// match every message (outside attack).
	"q across a NUL":      {Text: "head\x00after-nul"},
	"q NUL, nothing else": {Text: "\x00"},
	"q NUL then no match": {Text: "\x00no such text"},
	"q match then NUL":    {Text: "ORD-0012\x00"},
	"error NUL":           {Error: "\x00"},
	"error NUL and text":  {Error: "refused\x00"},
	"error not UTF-8":     {Error: "refused\xff"},
}

// searchAll returns every page of f, as topic/offset.
func searchAll(t *testing.T, s store.Store, f dlq.SearchFilter) ([]string, int64) {
	t.Helper()
	var got []string
	p := search(t, s, f)
	total := p.Total
	got = append(got, offsets(p)...)
	for p.Next != nil {
		f.After = p.Next
		p = search(t, s, f)
		got = append(got, offsets(p)...)
	}
	return got, total
}

// indexAll runs the indexer until nothing waits.
func indexAll(t *testing.T, ctx context.Context, s store.Store) {
	t.Helper()
	for i := 0; ; i++ {
		require.Less(t, i, 1000, "the indexer never finishes")
		done, waiting, err := s.IndexDLQSearch(ctx)
		require.NoError(t, err)
		if waiting == 0 {
			return
		}
		require.Positive(t, done, "%d waiting, none taken", waiting)
	}
}

func textFixture(t *testing.T, s store.Store) {
	t.Helper()
	searchFixture(t, s)
	nul := incoming("payments.dlq.v1", 2, "head\x00after-nul tail")
	nul.OriginalTopic = "payments.events.v1"
	ingest(t, s, t0.Add(4*time.Minute), nul)
}

// TestTextSearchIsExactWhateverTheIndexHolds: every text search gives the
// same pages and totals with nothing indexed, part indexed and everything
// indexed, and after a message's error changes (queued again) or it is
// deleted.
func TestTextSearchIsExactWhateverTheIndexHolds(t *testing.T) {
	storetest.Each(t, func(t *testing.T, ctx context.Context, s store.Store) {
		textFixture(t, s)
		m := search(t, s, dlq.SearchFilter{Key: ptr("order-3")}).Messages[0]
		resolve(t, s, m.ID, t0.Add(time.Hour))
		_, err := s.ArchiveDLQBatch(ctx, time.Now().Add(time.Hour), 100)
		require.NoError(t, err)

		type answer struct {
			got   []string
			total int64
		}
		want := map[string]answer{}
		for name, f := range textFilters {
			got, total := searchAll(t, s, f)
			want[name] = answer{got, total}
		}
		// What the searches found before any index: the row-by-row check.
		require.Equal(t, []string{"orders.dlq.v1/12"}, want["q one order"].got)
		require.Len(t, want["q every order"].got, 29, "ORD-0000..0029 but the archived 3")
		require.Len(t, want["q archived too"].got, 10)
		require.Equal(t, []string{"payments.dlq.v1/1"}, want["q binary"].got)
		require.Equal(t, []string{"payments.dlq.v1/2"}, want["q after NUL"].got)
		require.Equal(t, []string{"orders.dlq.v1/29"}, want["q non-ascii"].got)
		require.Equal(t, []string{"orders.dlq.v1/12"}, want["error selective"].got)
		require.Len(t, want["error broad"].got, 15)
		require.Equal(t, []string{"payments.dlq.v1/2"}, want["q across a NUL"].got)
		require.Equal(t, []string{"payments.dlq.v1/2", "payments.dlq.v1/1"}, want["q NUL, nothing else"].got, "the two payloads with a NUL")
		require.Empty(t, want["q NUL then no match"].got)
		require.Empty(t, want["q match then NUL"].got)
		require.Empty(t, want["error NUL"].got, "an error text never holds a NUL")
		require.Empty(t, want["error NUL and text"].got)
		require.Empty(t, want["error not UTF-8"].got, "an error text is valid UTF-8")

		check := func(state string) {
			t.Helper()
			for name, f := range textFilters {
				got, total := searchAll(t, s, f)
				require.Equal(t, want[name].got, got, "%s: %s", state, name)
				require.Equal(t, want[name].total, total, "%s: %s total", state, name)
				requireMatchSet(t, ctx, s, f, state+": "+name)
			}
		}
		check("nothing indexed")
		done, waiting, err := s.IndexDLQSearch(ctx)
		require.NoError(t, err)
		require.Positive(t, done)
		_ = waiting
		check("one batch indexed")
		indexAll(t, ctx, s)
		require.Equal(t, 33, count(t, s, `SELECT count(*)::int FROM dlq.dlq_search_text`, `SELECT count(*) FROM dlq_search_docs`),
			"every live message indexed once (34 stored, one archived)")
		check("everything indexed")

		// A new error text: the message is queued again and found by its
		// new text only, before and after it is indexed again.
		refused := search(t, s, dlq.SearchFilter{Error: "10.0.0.12:"}).Messages[0]
		exec(t, s, `UPDATE dlq.dlq_messages SET error_message = 'replay failed: quota exceeded for tenant zz9' WHERE id = $1`,
			`UPDATE dlq_messages SET error_message = 'replay failed: quota exceeded for tenant zz9' WHERE id = ?1`, refused.ID)
		for _, state := range []string{"queued again", "indexed again"} {
			require.Empty(t, search(t, s, dlq.SearchFilter{Error: "10.0.0.12:"}).Messages, state)
			require.Equal(t, []string{"orders.dlq.v1/12"}, offsets(search(t, s, dlq.SearchFilter{Error: "QUOTA EXCEEDED for tenant"})), state)
			indexAll(t, ctx, s)
		}

		// A deleted message leaves the index.
		require.NoError(t, s.DeleteDLQ(ctx, refused.ID))
		require.Equal(t, 32, count(t, s, `SELECT count(*)::int FROM dlq.dlq_search_text`, `SELECT count(*) FROM dlq_search_docs`))
		require.Empty(t, search(t, s, dlq.SearchFilter{Error: "quota exceeded"}).Messages)
	})
}

// requireMatchSet checks that a bulk operation's dry run and its set (live
// messages only, oldest first) hold exactly the live messages the search
// of f finds.
func requireMatchSet(t *testing.T, ctx context.Context, s store.Store, f dlq.SearchFilter, what string) {
	t.Helper()
	f.IncludeArchived, f.OldestFirst, f.Limit, f.After = false, true, 0, nil
	var want []uuid.UUID
	p := search(t, s, f)
	for {
		for _, m := range p.Messages {
			want = append(want, m.ID)
		}
		if p.Next == nil {
			break
		}
		f.After = p.Next
		p = search(t, s, f)
	}
	f.After = nil
	n, _, err := s.CountDLQOperation(ctx, dlq.OperationFilter{Search: f}, 0)
	require.NoError(t, err, what)
	require.EqualValues(t, len(want), n, "%s: dry run", what)
	now := time.Now()
	until := now.Add(time.Minute)
	op, err := s.CreateDLQOperation(ctx, dlq.Operation{ID: uuid.New(), Action: dlq.ActionRetry, State: dlq.OperationRunning,
		Filter: []byte("{}"), CreatedAt: now, UpdatedAt: now, LeaseOwner: "d1", LeaseExpiresAt: &until},
		dlq.OperationFilter{Search: f})
	require.NoError(t, err, what)
	require.EqualValues(t, len(want), op.Matched, "%s: matched", what)
	items, err := s.DLQOperationItems(ctx, op.ID, 0, len(want)+1)
	require.NoError(t, err, what)
	got := make([]uuid.UUID, len(items))
	for i, it := range items {
		got[i] = it.ID
	}
	if len(want) == 0 {
		want = []uuid.UUID{}
	}
	require.Equal(t, want, got, "%s: the operation's set, oldest first", what)
	require.NoError(t, s.FinishDLQOperation(ctx, op.ID, "d1", dlq.OperationCancelled, "", now))
}

// TestTextSearchWithManyCandidates: a text that more messages match than
// the index hands out as candidates is checked row by row, and the pages
// are the same indexed or not. The limit (2000) is scaled down tenfold
// here, with the messages.
func TestTextSearchWithManyCandidates(t *testing.T) {
	storetest.Each(t, func(t *testing.T, ctx context.Context, s store.Store) {
		store.SetSearchCandidateLimit(s, 200)
		var batch []dlq.Incoming
		for i := 0; i < 210; i++ {
			in := incoming("many.dlq.v1", int64(i), fmt.Sprintf(`{"n":%d,"note":"common words %d"}`, i, i%7))
			in.ErrorMessage = fmt.Sprintf("timeout %d", i%3)
			batch = append(batch, in)
		}
		ingest(t, s, t0, batch[:100]...)
		ingest(t, s, t0.Add(time.Second), batch[100:]...)
		filters := []dlq.SearchFilter{
			{Text: "common words", Limit: 50},
			{Text: "common words 3", Limit: 10},
			{Text: `"n":209`},
			{Error: "timeout 1", Limit: 100},
		}
		var before [][]string
		var totals []int64
		for _, f := range filters {
			got, total := searchAll(t, s, f)
			before = append(before, got)
			totals = append(totals, total)
		}
		require.Len(t, before[0], 210)
		require.Len(t, before[1], 30)
		require.Equal(t, []string{"many.dlq.v1/209"}, before[2])
		require.Len(t, before[3], 70)
		indexAll(t, ctx, s)
		for i, f := range filters {
			got, total := searchAll(t, s, f)
			require.Equal(t, before[i], got, "%+v", f)
			require.Equal(t, totals[i], total, "%+v", f)
			requireMatchSet(t, ctx, s, f, fmt.Sprintf("%+v", f))
		}
	})
}

// TestSearchIndexBatchIsBoundedByBytes: a batch of large payloads stops
// at the one that crosses the byte bound (8 MiB; a storm of large binary
// dead letters must not hold the store for long), and every message is
// indexed and found. The bound is scaled down a hundredfold here, with
// the payloads: 3 MiB ones took a minute on SQLite under the race
// detector.
func TestSearchIndexBatchIsBoundedByBytes(t *testing.T) {
	storetest.Each(t, func(t *testing.T, ctx context.Context, s store.Store) {
		const bound, size = 80 << 10, 30 << 10
		store.SetSearchIndexBatchBytes(s, bound)
		var batch []dlq.Incoming
		for i := 0; i < 5; i++ {
			big := make([]byte, size)
			for j := range big {
				big[j] = 'a' + byte(j%7)
			}
			copy(big[len(big)-20:], fmt.Sprintf("needle-%d-end", i))
			batch = append(batch, incoming("big.dlq.v1", int64(i), string(big)))
		}
		ingest(t, s, t0, batch...)
		done, waiting, err := s.IndexDLQSearch(ctx)
		require.NoError(t, err)
		require.Equal(t, 3, done, "0, 30 and 60 KiB start below 80 KiB; the fourth does not")
		require.EqualValues(t, 2, waiting)
		indexAll(t, ctx, s)
		for i := 0; i < 5; i++ {
			require.Equal(t, []string{fmt.Sprintf("big.dlq.v1/%d", i)}, offsets(search(t, s, dlq.SearchFilter{Text: fmt.Sprintf("NEEDLE-%d-END", i)})))
		}
	})
}

// TestTextSearchMatchesBytesNotTheirEscapes: a text filter finds the
// payloads that hold its bytes (ASCII case aside), and no other (outside
// attack). PostgreSQL compared escaped forms, where a NUL or a byte above
// 0x7f is \ooo and a backslash \\: "\x00 text" matched the ASCII text
// `\000 text`, and "7377" matched the byte 0xff before "377". SQLite's
// LIKE read a bad byte, in the filter or in a payload, as U+FFFD: "\xff"
// and "\ufffd" matched every payload holding either.
func TestTextSearchMatchesBytesNotTheirEscapes(t *testing.T) {
	storetest.Each(t, func(t *testing.T, ctx context.Context, s store.Store) {
		payloads := map[string]string{
			"escaped-nul":  `literal \000 text`,
			"escaped-ff":   `octal \377 text`,
			"replacement":  "replacement \uFFFD char",
			"ff-digits":    "\xff377 tail",
			"nul-text":     "a\x00 text",
			"backslashes":  `two \\ and one \ here`,
			"plain":        "Plain Text",
			"latin1-e":     "caf\xe9 cr\xe8me",
			"utf8-e":       "café crème",
			"ff-fe":        "\xfe\xff",
			"high-at-end":  "ends with \xff",
			"digits-after": "\x00123",
			// SQLite's LIKE read a lone continuation byte as U+00A9 and an
			// overlong E0 83 A9 as U+00E9 (third outside attack).
			"lone-a9":     "lone\xa9cont",
			"overlong-e9": "over\xe0\x83\xa9long",
			"after-nul":   "nul\x00AfterNUL tail",
		}
		var in []dlq.Incoming
		i := 0
		for name, p := range payloads {
			m := incoming("bytes.dlq.v1", int64(i), p)
			m.Key = []byte(name)
			in = append(in, m)
			i++
		}
		ingest(t, s, t0, in...)
		filters := map[string]struct {
			f    dlq.SearchFilter
			want []string
		}{
			"NUL then text":            {dlq.SearchFilter{Text: "\x00 text"}, []string{"nul-text"}},
			"0xff then text":           {dlq.SearchFilter{Text: "\xff text"}, nil},
			"digits inside an escape":  {dlq.SearchFilter{Text: "7377"}, nil},
			"digits after a byte":      {dlq.SearchFilter{Text: "377 tail"}, []string{"ff-digits"}},
			"0xff":                     {dlq.SearchFilter{Text: "\xff"}, []string{"ff-digits", "ff-fe", "high-at-end"}},
			"0xff 0xfe":                {dlq.SearchFilter{Text: "\xff\xfe"}, nil},
			"U+FFFD":                   {dlq.SearchFilter{Text: "\uFFFD"}, []string{"replacement"}},
			"ASCII backslash zeros":    {dlq.SearchFilter{Text: `\000`}, []string{"escaped-nul"}},
			"ASCII backslash 377":      {dlq.SearchFilter{Text: `\377 TEXT`}, []string{"escaped-ff"}},
			"one backslash":            {dlq.SearchFilter{Text: `one \ here`}, []string{"backslashes"}},
			"two backslashes":          {dlq.SearchFilter{Text: `\\`}, []string{"backslashes"}},
			"ASCII case":               {dlq.SearchFilter{Text: "plain TEXT"}, []string{"plain"}},
			"Latin-1 byte":             {dlq.SearchFilter{Text: "caf\xe9"}, []string{"latin1-e"}},
			"UTF-8 letter":             {dlq.SearchFilter{Text: "café"}, []string{"utf8-e"}},
			"NUL then digits":          {dlq.SearchFilter{Text: "\x00123"}, []string{"digits-after"}},
			"digits after NUL":         {dlq.SearchFilter{Text: "0123"}, nil},
			"escape of NUL, ASCII":     {dlq.SearchFilter{Text: `\000123`}, nil},
			"NUL then digits in topic": {dlq.SearchFilter{Text: "\x00123", Topic: "bytes.dlq.v1"}, []string{"digits-after"}},
			"U+00A9":                   {dlq.SearchFilter{Text: "lone\u00a9cont"}, nil},
			"U+00E9":                   {dlq.SearchFilter{Text: "over\u00e9long"}, nil},
			"é alone":                  {dlq.SearchFilter{Text: "\u00e9"}, []string{"utf8-e"}},
			"the lone byte":            {dlq.SearchFilter{Text: "LONE\xa9"}, []string{"lone-a9"}},
			"after a NUL, any case":    {dlq.SearchFilter{Text: "afternul"}, []string{"after-nul"}},
		}
		for _, state := range []string{"nothing indexed", "indexed"} {
			if state == "indexed" {
				indexAll(t, ctx, s)
			}
			for name, c := range filters {
				f := c.f
				f.Limit = 100
				var got []string
				for _, m := range search(t, s, f).Messages {
					got = append(got, string(m.Key))
				}
				require.ElementsMatch(t, c.want, got, "%s: %s", state, name)
				requireMatchSet(t, ctx, s, c.f, state+": "+name)
			}
		}
	})
}

// TestHeaderFiltersWithANULInAStoredHeaderName: a header name holding a
// NUL is stored as JSON text with \u0000, which PostgreSQL's jsonb refuses:
// every header search that read such a row failed (second outside attack).
func TestHeaderFiltersWithANULInAStoredHeaderName(t *testing.T) {
	storetest.Each(t, func(t *testing.T, ctx context.Context, s store.Store) {
		acme := incoming("h.dlq.v1", 1, "{}")
		acme.Headers = []dlq.Header{{Key: []byte("tenant"), Value: []byte("acme")}}
		nul := incoming("h.dlq.v1", 2, "{}")
		nul.Headers = []dlq.Header{{Key: []byte("nul\x00name"), Value: []byte("acme\x00evil")}, {Key: []byte("tenant"), Value: []byte("other")}}
		other := incoming("h.dlq.v1", 3, "{}")
		other.Headers = []dlq.Header{{Key: []byte("tenant<&>"), Value: []byte("acme")}, {Key: []byte("\xffbad"), Value: []byte("v8")}}
		ingest(t, s, t0, acme, nul, other)
		v := func(s string) *string { return &s }
		for name, c := range map[string]struct {
			h    dlq.HeaderFilter
			want []string
		}{
			"name and value":         {dlq.HeaderFilter{Name: "tenant", Value: v("acme")}, []string{"h.dlq.v1/1"}},
			"name":                   {dlq.HeaderFilter{Name: "tenant"}, []string{"h.dlq.v1/1", "h.dlq.v1/2"}},
			"a name with a NUL":      {dlq.HeaderFilter{Name: "nul\x00name"}, []string{"h.dlq.v1/2"}},
			"and its value":          {dlq.HeaderFilter{Name: "nul\x00name", Value: v("acme\x00evil")}, []string{"h.dlq.v1/2"}},
			"another value":          {dlq.HeaderFilter{Name: "nul\x00name", Value: v("acme")}, nil},
			"HTML characters":        {dlq.HeaderFilter{Name: "tenant<&>", Value: v("acme")}, []string{"h.dlq.v1/3"}},
			"a name that is no text": {dlq.HeaderFilter{Name: "tenant\xff"}, nil},
			"a stored name no text":  {dlq.HeaderFilter{Name: "\xffbad"}, []string{"h.dlq.v1/3"}},
			"and its value too":      {dlq.HeaderFilter{Name: "\xffbad", Value: v("v8")}, []string{"h.dlq.v1/3"}},
			"and another value":      {dlq.HeaderFilter{Name: "\xffbad", Value: v("v9")}, nil},
		} {
			f := dlq.SearchFilter{Headers: []dlq.HeaderFilter{c.h}}
			require.ElementsMatch(t, c.want, offsets(search(t, s, f)), name)
			requireMatchSet(t, ctx, s, f, name)
		}
	})
}
