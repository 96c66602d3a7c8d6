package db

import (
	"database/sql"
	"database/sql/driver"
	"errors"
	"net"
	"syscall"

	"github.com/go-sql-driver/mysql"

	"github.com/leasehold/leasehold/pkg/errs"
)

// MySQL and MariaDB server errors that say the server (or this node of a
// Galera cluster) cannot serve now, not that the statement is wrong.
var unavailableNumbers = map[uint16]bool{
	1040: true, // ER_CON_COUNT_ERROR: too many connections
	1047: true, // ER_UNKNOWN_COM_ERROR: "WSREP has not yet prepared node for application use" (Galera node not synced or not in the primary component)
	1053: true, // ER_SERVER_SHUTDOWN: server shutdown in progress
	1927: true, // ER_CONNECTION_KILLED: the server ended the session (a shutdown)
	2002: true, // CR_CONNECTION_ERROR
	2003: true, // CR_CONN_HOST_ERROR
	2006: true, // CR_SERVER_GONE_ERROR
	2013: true, // CR_SERVER_LOST
	4031: true, // ER_CLIENT_INTERACTION_TIMEOUT: the server closed an idle session
}

// IsUnavailable reports whether err says the database cannot be reached
// or cannot serve now (connection refused or lost, server shutting down,
// a Galera node not ready): the request did not fail because of what it
// asked and may succeed later. A write that failed this way was not
// acknowledged; it may or may not have committed when the connection
// broke during its COMMIT, so it is never run again blindly.
func IsUnavailable(err error) bool {
	if err == nil {
		return false
	}
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		return unavailableNumbers[me.Number]
	}
	if errors.Is(err, driver.ErrBadConn) || errors.Is(err, mysql.ErrInvalidConn) || errors.Is(err, sql.ErrConnDone) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) {
		return true
	}
	var ne *net.OpError
	return errors.As(err, &ne)
}

// MsgUnavailable is what a client is told when the database cannot be
// reached.
const MsgUnavailable = "The database is unavailable; try again later."

// AsUnavailable returns an errs.Unavailable error around err when
// IsUnavailable(err), nil otherwise. The API error renderers ask it about
// every error that would otherwise be an internal error (a 500): a
// database that is down is a 503 in the API's own error body.
func AsUnavailable(err error) *errs.Error {
	if !IsUnavailable(err) {
		return nil
	}
	return &errs.Error{Kind: errs.Unavailable, Msg: MsgUnavailable, Err: err}
}

// MsgTooManyConflicts is the message of a write that kept losing lock
// conflicts (on Galera: certification conflicts with writes through
// other nodes) for MaxWriteAttempts runs.
const MsgTooManyConflicts = "Too many concurrent writes to the same data; try again."

// tooManyConflicts classifies a write that lost lock conflicts on every
// attempt: nothing of it happened and the client may send it again, a
// 409, never an internal error. The cause stays in the chain, so
// IsLockConflict still reports it for callers with their own message.
func tooManyConflicts(err error) error {
	if errs.As(err) != nil {
		return err
	}
	return &errs.Error{Kind: errs.Conflict, Msg: MsgTooManyConflicts, Err: err}
}
