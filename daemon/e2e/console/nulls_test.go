package console

import (
	"net/url"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/lifecycled/lifecycled/daemon/e2e/apitest"
	"github.com/lifecycled/lifecycled/internal/testsvc"
)

// A tombstone (null value) with a null key and a null header value is
// shown as null, not as an empty payload or empty text (issue 27 case 4).
func TestATombstoneIsShownAsNull(t *testing.T) {
	t.Parallel()
	k, d := stormDaemon(t, "")
	ctx := testsvc.Context(t, time.Minute)
	require.NoError(t, k.Client(t).ProduceSync(ctx, &kgo.Record{Topic: "orders.dlq.v1", Headers: []kgo.RecordHeader{
		{Key: "kafka_dlt-original-topic", Value: []byte("orders.events.v1")}, {Key: "trace"}}}).FirstErr())
	waitStored(t, d, 10)
	var newest struct {
		Messages []struct {
			ID string `json:"id"`
		} `json:"messages"`
	}
	apitest.Expect(t, d, 200, &newest).Search(t.Context(), url.Values{"topic": {"orders.dlq.v1"}, "order": {"newest"}, "limit": {"1"}})
	id := newest.Messages[0].ID

	u, base := ui(t, d, nil)
	tb := tab(t, 2*time.Minute)
	do(t, tb, chromedp.Navigate(u), chromedp.WaitVisible(chromedp.CSS("#dlq-depth")),
		chromedp.Navigate(base+"/ui/dlq/messages/"+id), chromedp.WaitVisible(chromedp.CSS("#payload-null")))
	require.Contains(t, text(t, tb, "#payload-null"), "tombstone")
	require.Equal(t, "(null)", text(t, tb, "#message-key"))
	require.Contains(t, text(t, tb, "#headers"), "(null)")
	shot(t, tb, "tombstone")
}
