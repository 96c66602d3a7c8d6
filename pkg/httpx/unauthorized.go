package httpx

import "net/http"

// UnauthorizedBody is keystonemiddleware's 401 body. Its auth_token
// middleware answers before either API's own error handling, so clients
// of both APIs see this body, not the API's error format.
const UnauthorizedBody = `{"error": {"code": 401, "title": "Unauthorized", "message": "The request you have made requires authentication."}}`

// WriteUnauthorized answers 401 as keystonemiddleware does, with the
// WWW-Authenticate challenge naming the identity service when there is
// one.
func WriteUnauthorized(w http.ResponseWriter, challenge string) {
	if challenge != "" {
		w.Header().Set("WWW-Authenticate", challenge)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusUnauthorized)
	_, _ = w.Write([]byte(UnauthorizedBody))
}
