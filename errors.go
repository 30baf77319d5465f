// Package orrery holds what every layer of Orrery shares: the one error type that crosses the
// wire (docs/design.md §7), its codes, and the sentinels Go callers match with errors.Is.
package orrery

import (
	"errors"
	"fmt"
	"strings"

	orreryv1 "github.com/orreryhq/orrery/api/v1"
)

// Code is the closed set of error codes; its numbers are the wire enum's.
type Code = orreryv1.ErrorCode

// The codes, named for Go callers.
const (
	CodeValidation          = orreryv1.ErrorCode_ERROR_CODE_VALIDATION
	CodeNotFound            = orreryv1.ErrorCode_ERROR_CODE_NOT_FOUND
	CodeRevisionConflict    = orreryv1.ErrorCode_ERROR_CODE_REVISION_CONFLICT
	CodeTokenInvalidated    = orreryv1.ErrorCode_ERROR_CODE_TOKEN_INVALIDATED
	CodeIdempotencyConflict = orreryv1.ErrorCode_ERROR_CODE_IDEMPOTENCY_CONFLICT
	CodeUnauthorized        = orreryv1.ErrorCode_ERROR_CODE_UNAUTHORIZED
	CodeQuotaExceeded       = orreryv1.ErrorCode_ERROR_CODE_QUOTA_EXCEEDED
	CodeExpired             = orreryv1.ErrorCode_ERROR_CODE_EXPIRED
	CodeSuspended           = orreryv1.ErrorCode_ERROR_CODE_SUSPENDED
	CodeUnavailable         = orreryv1.ErrorCode_ERROR_CODE_UNAVAILABLE
	CodeInternal            = orreryv1.ErrorCode_ERROR_CODE_INTERNAL
	CodeDeadlineExceeded    = orreryv1.ErrorCode_ERROR_CODE_DEADLINE_EXCEEDED
)

// Error is Orrery's error: a code, a human message and, for bad input, the path of the
// offending field. It wraps an optional cause (platform failures wrap with %w semantics).
type Error struct {
	Code    Code
	Message string
	Field   string
	// LeaderSilo, on an Unavailable from a partition replica that does not lead, is the silo id
	// of the replica it believes leads (0: it knows none); the caller retries there.
	LeaderSilo uint64
	cause      error
}

// Sentinels for errors.Is: an *Error matches the sentinel of its code.
var (
	ErrValidation          = &Error{Code: CodeValidation}
	ErrNotFound            = &Error{Code: CodeNotFound}
	ErrRevisionConflict    = &Error{Code: CodeRevisionConflict}
	ErrTokenInvalidated    = &Error{Code: CodeTokenInvalidated}
	ErrIdempotencyConflict = &Error{Code: CodeIdempotencyConflict}
	ErrUnauthorized        = &Error{Code: CodeUnauthorized}
	ErrQuotaExceeded       = &Error{Code: CodeQuotaExceeded}
	ErrExpired             = &Error{Code: CodeExpired}
	ErrSuspended           = &Error{Code: CodeSuspended}
	ErrUnavailable         = &Error{Code: CodeUnavailable}
	ErrInternal            = &Error{Code: CodeInternal}
	ErrDeadlineExceeded    = &Error{Code: CodeDeadlineExceeded}
)

// Errorf builds an error of the given code about no particular field.
func Errorf(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// FieldErrorf builds an error of the given code about the named field.
func FieldErrorf(code Code, field, format string, args ...any) *Error {
	return &Error{Code: code, Field: field, Message: fmt.Sprintf(format, args...)}
}

// Invalid builds a Validation error naming the field.
func Invalid(field, format string, args ...any) *Error {
	return FieldErrorf(CodeValidation, field, format, args...)
}

// Wrap builds an error of the given code that wraps a platform cause.
func Wrap(code Code, cause error, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...), cause: cause}
}

// Error renders "code: field: message".
func (e *Error) Error() string {
	s := codeName(e.Code)
	if e.Field != "" {
		s += ": " + e.Field
	}
	if e.Message != "" {
		s += ": " + e.Message
	}
	if e.cause != nil {
		s += ": " + e.cause.Error()
	}
	return s
}

// Unwrap returns the platform cause, if any.
func (e *Error) Unwrap() error { return e.cause }

// Is reports whether target is an *Error with the same code (sentinels match by code). A
// target that names a field matches only an error whose field is that one, alone or as the
// last element of its path ("paused" matches "mutations[0].trigger_schedule.paused"): a
// refusal by a record's state names the state field that refuses it, and a sentinel such as
// client.ErrSchedulePaused tells that state from the others of one code.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	if !ok || t.Code != e.Code {
		return false
	}
	return t.Field == "" || e.Field == t.Field || strings.HasSuffix(e.Field, "."+t.Field)
}

// InField returns a copy whose field is prefix + "." + the original field (or prefix alone).
func (e *Error) InField(prefix string) *Error {
	c := *e
	switch {
	case prefix == "":
	case c.Field == "":
		c.Field = prefix
	default:
		c.Field = prefix + "." + c.Field
	}
	return &c
}

// Proto converts the error to its wire form.
func (e *Error) Proto() *orreryv1.Error {
	msg := e.Message
	if e.cause != nil {
		if msg != "" {
			msg += ": "
		}
		msg += e.cause.Error()
	}
	return &orreryv1.Error{Code: e.Code, Message: msg, Field: e.Field, LeaderSilo: e.LeaderSilo}
}

// FromProto converts a wire error to Go; nil stays nil.
func FromProto(p *orreryv1.Error) error {
	if p == nil {
		return nil
	}
	return &Error{Code: p.GetCode(), Message: p.GetMessage(), Field: p.GetField(), LeaderSilo: p.GetLeaderSilo()}
}

// LeaderSiloOf returns the first non-zero LeaderSilo among the *Errors in err's tree (a
// wrapper's own, then its causes', errors.Join branches included), 0 when none names one.
func LeaderSiloOf(err error) uint64 {
	switch e := err.(type) {
	case nil:
		return 0
	case *Error:
		if e.LeaderSilo != 0 {
			return e.LeaderSilo
		}
	}
	switch w := err.(type) {
	case interface{ Unwrap() error }:
		return LeaderSiloOf(w.Unwrap())
	case interface{ Unwrap() []error }:
		for _, inner := range w.Unwrap() {
			if silo := LeaderSiloOf(inner); silo != 0 {
				return silo
			}
		}
	}
	return 0
}

// AsError returns err as an *Error. Errors that are not Orrery errors become Internal, except
// context deadline expiry, which becomes DeadlineExceeded.
func AsError(err error) *Error {
	if err == nil {
		return nil
	}
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	if errors.Is(err, errDeadline) {
		return Wrap(CodeDeadlineExceeded, err, "deadline exceeded")
	}
	return Wrap(CodeInternal, err, "internal error")
}

// CodeOf returns the code of err (Internal for foreign errors, 0 for nil).
func CodeOf(err error) Code {
	if err == nil {
		return orreryv1.ErrorCode_ERROR_CODE_UNSPECIFIED
	}
	return AsError(err).Code
}

// Retriable reports whether a caller may retry the same command id after this error.
func Retriable(code Code) bool {
	_, retriable := classify(code)
	return retriable
}

// HTTPStatus maps a code to the HTTP status the admin endpoint answers with.
func HTTPStatus(code Code) int {
	status, _ := classify(code)
	return status
}

// classify is the one exhaustive mapping of codes to HTTP status and retriability. Status
// numbers are literal so the pure core, which imports this package, does not link net/http.
func classify(code Code) (httpStatus int, retriable bool) {
	switch code {
	case CodeValidation:
		return 400, false
	case CodeNotFound:
		return 404, false
	case CodeRevisionConflict, CodeTokenInvalidated, CodeIdempotencyConflict:
		return 409, false
	case CodeUnauthorized:
		return 403, false
	case CodeQuotaExceeded:
		return 429, false
	case CodeExpired:
		return 410, false
	case CodeSuspended:
		return 423, false
	case CodeUnavailable:
		return 503, true
	case CodeDeadlineExceeded:
		return 504, true
	case CodeInternal:
		return 500, false
	default: // ERROR_CODE_UNSPECIFIED and unknown future numbers
		return 500, false
	}
}

func codeName(code Code) string {
	switch code {
	case CodeValidation:
		return "validation"
	case CodeNotFound:
		return "not found"
	case CodeRevisionConflict:
		return "revision conflict"
	case CodeTokenInvalidated:
		return "token invalidated"
	case CodeIdempotencyConflict:
		return "idempotency conflict"
	case CodeUnauthorized:
		return "unauthorized"
	case CodeQuotaExceeded:
		return "quota exceeded"
	case CodeExpired:
		return "expired"
	case CodeSuspended:
		return "suspended"
	case CodeUnavailable:
		return "unavailable"
	case CodeInternal:
		return "internal"
	case CodeDeadlineExceeded:
		return "deadline exceeded"
	default:
		return fmt.Sprintf("code %d", int32(code))
	}
}
