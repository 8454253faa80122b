package cli

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/lifecycled/lifecycled/daemon/wire"
)

// bulkChunk bounds the tenants of one request (the API takes 10,000) and
// its body (the API takes 1 MiB).
const (
	bulkChunk      = 10000
	bulkChunkBytes = 900 << 10
)

// listedTenant is one id of a --from file with its line number.
type listedTenant struct {
	line int
	id   string
}

// readTenantList reads one tenant id a line; blank lines and lines that
// start with # are skipped.
func readTenantList(r io.Reader) ([]listedTenant, error) {
	var out []listedTenant
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for n := 1; sc.Scan(); n++ {
		id := strings.TrimSpace(sc.Text())
		if id == "" || strings.HasPrefix(id, "#") {
			continue
		}
		out = append(out, listedTenant{line: n, id: id})
	}
	return out, sc.Err()
}

// chunks splits the list into requests of at most bulkChunk ids and
// bulkChunkBytes of ids.
func chunks(list []listedTenant) [][]listedTenant {
	var out [][]listedTenant
	start, size := 0, 0
	for i, t := range list {
		if i-start == bulkChunk || (size+len(t.id)+4 > bulkChunkBytes && i > start) {
			out = append(out, list[start:i])
			start, size = i, 0
		}
		size += len(t.id) + 4
	}
	if start < len(list) {
		out = append(out, list[start:])
	}
	return out
}

var detailIndexRE = regexp.MustCompile(`^tenant_ids\[(\d+)\]$`)

// bulkDelete queues the deletions of a list of tenants (POST
// /api/v1/deletions, one request per chunk) and reports by line.
func bulkDelete(g *globals, c *client, from, notBefore string, yes bool) error {
	var (
		r    io.Reader = os.Stdin
		name           = "stdin"
	)
	if from != "-" {
		f, err := os.Open(from)
		if err != nil {
			return localErrorf("read tenant list: %v", err)
		}
		defer f.Close()
		r, name = f, from
	} else if !yes {
		return usageErrorf("--from - reads the list from stdin, so it cannot confirm there: add --yes")
	}
	list, err := readTenantList(r)
	if err != nil {
		return localErrorf("read tenant list %s: %v", name, err)
	}
	if len(list) == 0 {
		return usageErrorf("%s holds no tenant id", name)
	}
	if !yes {
		if !isTTY(os.Stdin) {
			return usageErrorf("refusing to delete %s without --yes: stdin is not a terminal to confirm on", plural(len(list), "tenant"))
		}
		fmt.Fprintf(g.stderr, "This deletes every item of %s listed in %s, in every store, for good.\nType the number of tenants to confirm: ",
			plural(len(list), "tenant"), name)
		line, _ := bufio.NewReader(os.Stdin).ReadString('\n')
		if strings.TrimSpace(line) != strconv.Itoa(len(list)) {
			return localErrorf("not confirmed; nothing was deleted")
		}
	}
	total := wire.BulkResult{Results: []wire.BulkItem{}}
	var lines []int
	for i, part := range chunks(list) {
		ids := make([]string, len(part))
		for j, t := range part {
			ids[j] = t.id
		}
		body := wire.BulkRequest{TenantIDs: ids}
		if notBefore != "" {
			body.NotBefore = &notBefore
		}
		ctx, cancel := withTimeout(5 * time.Minute)
		ans, err := c.RequestDeletions(ctx, body, once())
		cancel()
		if err != nil {
			return bulkError(g, err, part, i > 0, total.Queued+total.Existing)
		}
		base := len(total.Results)
		for _, res := range ans.Results {
			res.Index += base
			total.Results = append(total.Results, res)
			lines = append(lines, part[res.Index-base].line)
		}
		total.Queued, total.Existing, total.OnHold = total.Queued+ans.Queued, total.Existing+ans.Existing, total.OnHold+ans.OnHold
	}
	var attention error
	if total.OnHold > 0 {
		attention = &exitError{code: ExitAttention, silent: g.json(),
			err: fmt.Errorf("%s on legal hold: not queued", plural(total.OnHold, "tenant"))}
	}
	if g.json() {
		_ = g.printValue(total)
		return attention
	}
	fmt.Fprintf(g.stdout, "%s listed: %d queued, %d already had an active job, %d on legal hold\n",
		plural(len(list), "tenant"), total.Queued, total.Existing, total.OnHold)
	for i, res := range total.Results {
		if res.Error != nil {
			fmt.Fprintf(g.stdout, "line %d: %s: %s\n", lines[i], res.Error.Code, strings.ReplaceAll(res.Error.Message, "\n", " "))
		}
	}
	if total.Queued+total.Existing > 0 {
		fmt.Fprintln(g.stdout, "follow them with: lifecycled tenant jobs --status SCHEDULED,PENDING,RUNNING,PARTIAL")
	}
	return attention
}

// bulkError names the lines of invalid ids in a refused request.
func bulkError(g *globals, err error, part []listedTenant, earlier bool, queuedBefore int) error {
	var se *serverError
	if !errors.As(err, &se) || se.Status != 400 {
		return err
	}
	var env struct {
		Error struct {
			Details []wire.FieldProblem `json:"details"`
		} `json:"error"`
	}
	if json.Unmarshal(se.Body, &env) != nil || len(env.Error.Details) == 0 {
		return err
	}
	if !g.json() {
		for _, d := range env.Error.Details {
			m := detailIndexRE.FindStringSubmatch(d.Field)
			if m == nil {
				continue
			}
			i, _ := strconv.Atoi(m[1])
			if i < len(part) {
				fmt.Fprintf(g.stderr, "line %d: %s\n", part[i].line, oneLine(d.Problem))
			}
		}
		if earlier {
			fmt.Fprintf(g.stderr, "the ids before line %d went in earlier requests: %d of them have a job now\n", part[0].line, queuedBefore)
		} else {
			fmt.Fprintln(g.stderr, "nothing was queued")
		}
	}
	return err
}
