package sdk

import (
	"context"
	"errors"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/lifecycled/lifecycled/sdk/internal/wire"
	pb "github.com/lifecycled/lifecycled/sdk/proto/lifecycled/plugin/v1"
)

// The one mapping table at the plugin boundary: sdk Code <-> gRPC code. The
// class, retry-after, field problems and partial count travel in an
// ErrorInfo detail, so they survive even where two codes share a gRPC code.
var codeToGRPC = map[Code]codes.Code{
	CodeUnknown:         codes.Unknown,
	CodeInvalidConfig:   codes.InvalidArgument,
	CodeInvalidArgument: codes.InvalidArgument,
	CodeNotFound:        codes.NotFound,
	CodeUnsupported:     codes.Unimplemented,
	CodeUnavailable:     codes.Unavailable,
	CodeInternal:        codes.Internal,
	CodeCanceled:        codes.Canceled,
	CodeNotCommitted:    codes.Unavailable,
}

var codeToPB = map[Code]pb.ErrorInfo_Code{
	CodeUnknown:         pb.ErrorInfo_CODE_UNSPECIFIED,
	CodeInvalidConfig:   pb.ErrorInfo_CODE_INVALID_CONFIG,
	CodeInvalidArgument: pb.ErrorInfo_CODE_INVALID_ARGUMENT,
	CodeNotFound:        pb.ErrorInfo_CODE_NOT_FOUND,
	CodeUnsupported:     pb.ErrorInfo_CODE_UNSUPPORTED,
	CodeUnavailable:     pb.ErrorInfo_CODE_UNAVAILABLE,
	CodeInternal:        pb.ErrorInfo_CODE_INTERNAL,
	CodeCanceled:        pb.ErrorInfo_CODE_CANCELED,
	CodeNotCommitted:    pb.ErrorInfo_CODE_NOT_COMMITTED,
}

var classToPB = map[Class]pb.ErrorInfo_Class{
	ClassUnknown:   pb.ErrorInfo_CLASS_UNSPECIFIED,
	ClassRetryable: pb.ErrorInfo_CLASS_RETRYABLE,
	ClassPermanent: pb.ErrorInfo_CLASS_PERMANENT,
}

func reverse[K comparable, V comparable](m map[K]V) map[V]K {
	out := make(map[V]K, len(m))
	for k, v := range m {
		out[v] = k
	}
	return out
}

var (
	pbToCode  = reverse(codeToPB)
	pbToClass = reverse(classToPB)
)

func errorInfo(e *Error) *pb.ErrorInfo {
	info := &pb.ErrorInfo{
		Class:        classToPB[e.Class],
		Code:         codeToPB[e.Code],
		RetryAfterMs: e.RetryAfter.Milliseconds(),
		HasDeleted:   e.HasDeleted,
		Deleted:      e.Deleted,
	}
	for _, f := range e.Fields {
		info.FieldErrors = append(info.FieldErrors, &pb.FieldError{Field: validUTF8(f.Field), Problem: validUTF8(f.Problem)})
	}
	return info
}

func fromErrorInfo(info *pb.ErrorInfo, msg string) *Error {
	e := &Error{
		Class:      pbToClass[info.GetClass()],
		Code:       pbToCode[info.GetCode()],
		Message:    msg,
		RetryAfter: time.Duration(info.GetRetryAfterMs()) * time.Millisecond,
		HasDeleted: info.GetHasDeleted(),
		Deleted:    info.GetDeleted(),
	}
	for _, f := range info.GetFieldErrors() {
		e.Fields = append(e.Fields, FieldError{Field: f.GetField(), Problem: f.GetProblem()})
	}
	return e
}

// toStatus converts a plugin error to a gRPC status carrying its meaning.
// status.Errorf does not wrap, so the conversion is explicit.
func toStatus(err error) error {
	if err == nil {
		return nil
	}
	e := asError(err)
	if e.Class == ClassUnknown {
		e.Class = ClassRetryable // see ClassOf: an unclassed failure may pass
	}
	st := status.New(codeToGRPC[e.Code], validUTF8(e.Message))
	if withInfo, derr := st.WithDetails(errorInfo(e)); derr == nil {
		st = withInfo
	}
	return st.Err()
}

// fromStatus converts an error returned by a gRPC call back to an *Error.
// Errors without our detail (the plugin process died, the connection broke,
// the deadline passed) are classed by their gRPC code.
func fromStatus(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, context.Canceled) {
		return &Error{Class: ClassRetryable, Code: CodeCanceled, Message: err.Error(), cause: err}
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return &Error{Class: ClassRetryable, Code: CodeUnavailable, Message: "plugin call timed out: " + err.Error(), cause: err}
	}
	st, ok := status.FromError(err)
	if !ok {
		return &Error{Class: ClassRetryable, Code: CodeUnavailable, Message: err.Error(), cause: err}
	}
	for _, d := range st.Details() {
		if info, ok := d.(*pb.ErrorInfo); ok {
			return fromErrorInfo(info, st.Message())
		}
	}
	e := &Error{Message: st.Message(), cause: err}
	switch st.Code() {
	case codes.Unavailable, codes.ResourceExhausted, codes.Aborted, codes.DeadlineExceeded:
		e.Class, e.Code = ClassRetryable, CodeUnavailable
		if st.Code() == codes.Unavailable {
			e.Message = "plugin unavailable: " + st.Message()
		}
	case codes.Canceled:
		e.Class, e.Code = ClassRetryable, CodeCanceled
	case codes.InvalidArgument:
		e.Class, e.Code = ClassPermanent, CodeInvalidArgument
	case codes.NotFound:
		e.Class, e.Code = ClassPermanent, CodeNotFound
	case codes.Unimplemented:
		e.Class, e.Code = ClassPermanent, CodeUnsupported
	default:
		e.Class, e.Code = ClassRetryable, CodeInternal
	}
	return e
}

// sdk/host calls the daemon's end of the conversion through wire: it
// builds *Error values with a cause, which this package alone can.
func init() {
	wire.FromStatus = fromStatus
	wire.FromErrorInfo = func(info *pb.ErrorInfo, msg string) error { return fromErrorInfo(info, msg) }
}
