package main

// The route table and the per-endpoint rules of vmm/src/api/http: paths match exactly under
// /api/v1; GET endpoints ignore a body; PUT actions without a body answer 400 if one is sent;
// the wrong method is 400; an unknown path is 404 ["Not Found"]; errors are JSON arrays of
// strings from the outermost error to the root cause; success is 204, or 200 with a body.

const apiRoot = "/api/v1"

type endpointKind int

const (
	getEndpoint    endpointKind = iota // GET, answers with a body
	actionEndpoint                     // PUT without a body
	createEndpoint                     // PUT with a VmConfig body
	bodyEndpoint                       // PUT with a required JSON body
	vmmShutdownEndpoint
)

type handler struct {
	kind     endpointKind
	get      func(v *vmm) ([]byte, *apiError)
	action   func(v *vmm) *apiError
	withBody func(v *vmm, body []byte) *apiError
}

var routes = map[string]handler{
	apiRoot + "/vmm.ping":        {kind: getEndpoint, get: (*vmm).ping},
	apiRoot + "/vm.info":         {kind: getEndpoint, get: (*vmm).info},
	apiRoot + "/vm.create":       {kind: createEndpoint},
	apiRoot + "/vm.boot":         {kind: actionEndpoint, action: (*vmm).boot},
	apiRoot + "/vm.shutdown":     {kind: actionEndpoint, action: (*vmm).shutdownVM},
	apiRoot + "/vm.reboot":       {kind: actionEndpoint, action: (*vmm).reboot},
	apiRoot + "/vm.power-button": {kind: actionEndpoint, action: (*vmm).powerButton},
	apiRoot + "/vm.pause":        {kind: actionEndpoint, action: (*vmm).pause},
	apiRoot + "/vm.resume":       {kind: actionEndpoint, action: (*vmm).resume},
	apiRoot + "/vm.delete":       {kind: actionEndpoint, action: (*vmm).delete},
	apiRoot + "/vmm.shutdown":    {kind: vmmShutdownEndpoint},

	apiRoot + "/vm.send-migration":    {kind: bodyEndpoint, withBody: (*vmm).sendMigration},
	apiRoot + "/vm.receive-migration": {kind: bodyEndpoint, withBody: (*vmm).receiveMigration},
}

func errorResponse(status int, chain ...string) response {
	return response{status: status, body: mustJSON(chain)}
}

var badRequest = errorResponse(400, "Bad Request")

func fromAPIError(err *apiError) response {
	return errorResponse(err.status, err.chain...)
}

// route answers one request. It runs on the HTTP thread and takes the VMM thread's lock for
// the action, as every real endpoint hands its action to the VMM thread and waits for it.
func route(v *vmm, req *request) response {
	h, found := routes[req.path]
	if !found {
		return errorResponse(404, "Not Found")
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	v.log.debug("vmm/src/api/http/mod.rs", "HTTP API request: %s %s", req.method, req.path)
	switch h.kind {
	case getEndpoint:
		if req.method != "GET" {
			return badRequest
		}
		body, err := h.get(v)
		if err != nil {
			return fromAPIError(err)
		}
		return response{status: 200, body: body}
	case createEndpoint:
		switch {
		case req.method != "PUT":
			return badRequest
		case req.body == nil:
			return response{status: 400}
		}
		if err := v.create(req.body); err != nil {
			return fromAPIError(err)
		}
		return response{status: 204}
	case bodyEndpoint:
		if req.method != "PUT" || req.body == nil {
			return badRequest
		}
		if err := h.withBody(v, req.body); err != nil {
			return fromAPIError(err)
		}
		return response{status: 204}
	case vmmShutdownEndpoint:
		if req.method != "PUT" {
			return badRequest
		}
		if v.migration != nil {
			return errorResponse(500, "Error from API", "The VMM could not shutdown", vmMigrating)
		}
		return response{status: 200, exitAfter: true}
	}
	switch {
	case req.method == "GET", req.method == "PUT" && req.body != nil:
		return badRequest
	case req.method != "PUT":
		return response{status: 400}
	}
	if err := h.action(v); err != nil {
		return fromAPIError(err)
	}
	return response{status: 204}
}
