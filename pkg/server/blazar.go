package server

import (
	"context"
	"net/http"

	blazarapi "github.com/leasehold/leasehold/handlers/blazar"
	"github.com/leasehold/leasehold/pkg/placement"
)

// setupBlazar builds the Blazar v1 API (routes registered by the resource
// packages) and any background workers it needs (the event manager).
func (s *Server) setupBlazar(ctx context.Context, psvc *placement.Service) (http.Handler, error) {
	rt := blazarapi.NewRouter()
	return rt.Handler(blazarapi.NoAuth{}), nil
}
