package deletion

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/lifecycled/lifecycled/daemon/internal/derrors"
)

// ApprovalStore keeps plans and approvals.
type ApprovalStore interface {
	// SavePlan stores a plan shape under its hash; saving it again changes
	// nothing.
	SavePlan(ctx context.Context, hash string, body []byte, now time.Time) error
	// PlanBody returns the shape stored under hash; derrors.ErrNotFound if none.
	PlanBody(ctx context.Context, hash string) ([]byte, error)
	// ApproveDeletionJob approves job id if it is AWAITING_APPROVAL: it is
	// held to planHash from now on, and becomes SCHEDULED until its
	// not_before, else PENDING. derrors.ErrConflict when the job is not
	// AWAITING_APPROVAL (any more).
	ApproveDeletionJob(ctx context.Context, id uuid.UUID, planHash string, uid *int64, now time.Time) (*Job, error)
	// AwaitApproval ends the attempt of a job whose plan drifted: the job
	// goes back to AWAITING_APPROVAL with drift as its reason and releases
	// its lease, unless a cancel was requested meanwhile (then it is
	// CANCELLED). derrors.ErrLeaseLost if another owner holds it.
	AwaitApproval(ctx context.Context, id uuid.UUID, owner, drift string, now time.Time) error
	// AdoptPlan holds a job that had no plan (none was complete when it
	// was created) to planHash; derrors.ErrLeaseLost as above.
	AdoptPlan(ctx context.Context, id uuid.UUID, owner, planHash string) error
}

// ErrPlanChanged means the plan an operator saw (its hash) is not the
// plan now: something changed in between, so what they approved or asked
// for is not what would be deleted.
var ErrPlanChanged = errors.New("the plan changed")

// ErrPlanIncomplete means a deleter could not plan, so the plan has no
// hash to check against.
var ErrPlanIncomplete = errors.New("the plan is incomplete")

// ErrApproverNotDistinct means the two-person rule refused an approval.
var ErrApproverNotDistinct = errors.New("the approver must not be the requester")

// PlanChangedError refuses a request that named a plan hash that is not
// the current one. It is ErrPlanChanged.
type PlanChangedError struct {
	Given, Current string
	// Drift names what changed when the plan given is known to the store.
	Drift []string
}

func (e *PlanChangedError) Error() string {
	msg := fmt.Sprintf("plan_hash %s is not the tenant's plan now (%s): the plan changed since it was read; read it again (GET /api/v1/tenants/{tenant}/plan, lifecycled tenant plan) and check it", e.Given, e.Current)
	if len(e.Drift) > 0 {
		msg += "; what changed: " + strings.Join(e.Drift, "; ")
	}
	return msg
}

// Is makes errors.Is match ErrPlanChanged.
func (e *PlanChangedError) Is(target error) bool { return target == ErrPlanChanged }

// PlanIncompleteError refuses a request that needs a plan hash while a
// deleter cannot plan. It is ErrPlanIncomplete.
type PlanIncompleteError struct{ Failed []DeleterPlan }

func (e *PlanIncompleteError) Error() string {
	parts := make([]string, 0, len(e.Failed))
	for _, f := range e.Failed {
		parts = append(parts, fmt.Sprintf("%s: %s", f.Name, f.Error))
	}
	return fmt.Sprintf("the plan is incomplete, so it has no hash to check: %d deleter(s) could not plan: %s", len(e.Failed), strings.Join(parts, "; "))
}

// Is makes errors.Is match ErrPlanIncomplete.
func (e *PlanIncompleteError) Is(target error) bool { return target == ErrPlanIncomplete }

// NotDistinctError refuses an approval under approvers_distinct. It is
// ErrApproverNotDistinct.
type NotDistinctError struct{ Reason string }

func (e *NotDistinctError) Error() string {
	return "deletion.approvers_distinct requires two people: " + e.Reason
}

// Is makes errors.Is match ErrApproverNotDistinct.
func (e *NotDistinctError) Is(target error) bool { return target == ErrApproverNotDistinct }

var planHashRE = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)

// CheckPlanHash validates the form of a plan hash an operator sends.
func CheckPlanHash(h string) error {
	if !planHashRE.MatchString(h) {
		return fmt.Errorf("%w: plan_hash: %q is not a plan hash (sha256: and 64 lower-case hex digits, as GET /api/v1/tenants/{tenant}/plan shows it)",
			derrors.ErrInvalid, h)
	}
	return nil
}

// checkTwoPeople applies the two-person rule: the approver and the
// requester are known and differ. A uid that is unknown cannot be told
// apart from the other, so it is refused.
func checkTwoPeople(job *Job, approver *int64) error {
	switch {
	case approver == nil:
		return &NotDistinctError{Reason: "the approver's uid is unknown (approve through the admin socket)"}
	case job.RequestedByUID == nil:
		return &NotDistinctError{Reason: fmt.Sprintf("job %s has no requester uid on record, so no approver can be told apart from the requester; cancel it and request the deletion again through the admin socket", job.ID)}
	case *job.RequestedByUID == *approver:
		return &NotDistinctError{Reason: fmt.Sprintf("uid %d requested job %s and may not approve it; another person (uid) must", *approver, job.ID)}
	}
	return nil
}
