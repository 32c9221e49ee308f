// Generated from the API document by `npm run client:generate` (openapi-typescript); do not edit.
// test/client.test.ts fails when this file and the document disagree.

export interface paths {
    "/sign-ups": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Start a sign-up: a code goes to the identifier
         * @description The same 202, body and timing whether or not the identifier already has an account (an existing owner gets a password-recovery code instead).
         */
        post: operations["startSignUp"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/sign-ups/confirmation": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Confirm a sign-up with its code and the password of the latest sign-up request; answers a session
         * @description The password must be the one the latest sign-up request for the identifier gave (whoever asked last chose the candidate), so a code alone never activates an account with somebody else's password. A wrong code, a wrong password, an expired or used code, and a code past the identity's daily wrong-code budget all answer the same 422 invalid_code and spend an attempt.
         */
        post: operations["confirmSignUp"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/sessions": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** The live sessions of the caller (neither revoked, expired nor idle), newest first */
        get: operations["listSessions"];
        put?: never;
        /** Sign in with a verified identifier and the password */
        post: operations["signIn"];
        /**
         * Sign out everywhere (a fresh step-up of this session): every session of the caller stops working, this one too
         * @description The trusted devices stay trusted: forgetting them is DELETE /devices, a step-up action of its own.
         */
        delete: operations["signOutEverywhere"];
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/sessions/current": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        post?: never;
        /** Sign out: the session token stops working */
        delete: operations["signOut"];
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/sign-in-methods": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Add a sign-in method: a code goes to it (needs a fresh step-up of this session)
         * @description An identifier another account verified takes exactly the path of a free one (claim, challenge, resend interval, destination budget, a code to the address), so no answer tells whether it belongs to someone. At most 10 additions an hour per identity.
         */
        post: operations["addSignInMethod"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/sign-in-methods/confirmation": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /** Confirm a new sign-in method with its code; the identity's other verified identifiers get a security notice */
        post: operations["confirmSignInMethod"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/sign-in-methods/removals": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Remove a sign-in method (needs a fresh step-up of this session); every verified identifier, the removed one too, gets a security notice
         * @description The primary identifier — the first the identity verified, where step-up codes go — cannot be removed (409). An identifier that is not one of your verified sign-in methods is 404, whether or not another account has it.
         */
        post: operations["removeSignInMethod"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/password-recoveries": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Ask for a recovery code
         * @description The same 202, body and timing for unknown identifiers.
         */
        post: operations["requestPasswordRecovery"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/password-recoveries/completion": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Set a new password with the recovery code; revokes every session and sends a security notice to the other verified identifiers
         * @description A new password the policy refuses (weak_password, breached_password) is refused before the code is looked at: no attempt is spent and the code stays usable.
         */
        post: operations["completePasswordRecovery"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/step-ups": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /** Ask for a step-up code (to the primary identifier: the first the identity verified) */
        post: operations["startStepUp"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/step-ups/confirmation": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /** Exchange the step-up code for an elevation token (5 minutes, this session only) */
        post: operations["confirmStepUp"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/devices": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        post?: never;
        /** Forget every trusted device (a fresh step-up of this session): the caller's clients spend the budgets strangers share until they sign in again; the sessions go on */
        delete: operations["forgetDevices"];
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/password-changes": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Change the password: the current one and a fresh step-up of this session; revokes every other session and sends a security notice to every verified identifier
         * @description At most 5 attempts an hour per identity, right or wrong; a wrong current password answers 403 wrong_password and changes nothing.
         */
        post: operations["changePassword"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/organizations": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Create an organization; the caller becomes its admin
         * @description The name is stored in its NFKC form and mailed in invitations, so a name with a URL, a scheme, www., a domain (also with look-alike or defanged dots), an e-mail address, a line or paragraph separator, a bidi control or an invisible character is refused. At most 5 organizations per identity per day.
         */
        post: operations["createOrganization"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/organizations/{id}/invitations": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /** Invite an email address (organization admins); a join link goes to it */
        post: operations["inviteToOrganization"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/organizations/{id}/invitations/{invitationId}": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        post?: never;
        /** Revoke an invitation (organization admins); its unsent message is dead-lettered */
        delete: operations["revokeInvitation"];
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/invitations/acceptance": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Accept an invitation with the token from its link; the caller becomes a member
         * @description Only an identity that holds the invited email as a verified identifier can accept; a forwarded link answers the same 422 invalid_invitation as a used, revoked or expired token.
         */
        post: operations["acceptInvitation"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/platform-admin/security-outbox/backlog": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** Is delivery healthy? Messages per state, the oldest due age, dead letters of the last 24 h, the queue */
        get: operations["getOutboxBacklog"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/platform-admin/security-outbox/dead-letters": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** A keyset page of dead letters, newest first, destinations masked */
        get: operations["listDeadLetters"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/platform-admin/security-outbox/messages/{messageId}": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** One message's history: the message (destination masked), its attempts and its dead letter */
        get: operations["getOutboxMessage"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/platform-admin/security-outbox/dead-letters/{messageId}/reissues": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Send a dead-lettered code again with a fresh code (audited, idempotent)
         * @description Needs a fresh elevation token of this staff session and an Idempotency-Key. The key remembers the first answer once the request reached it — the reissue (201) or its refusal (404, 409) — and a repeat answers it again with `Idempotent-Replayed: true` and does nothing; answers given before the key is read (401, 403, 400 `idempotency_key_required`, 422 `idempotency_key_reused` for a key used on another dead letter) and failures on our side (503) are not remembered, so the repeat is tried afresh.
         */
        post: operations["reissueDeadLetter"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/platform-admin/security-outbox/message-searches": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * The messages sent to one exact destination, newest first, destinations masked
         * @description The destination travels in the body (never a URL, so no access log holds it); the server looks messages up by the keyed hash the suppression list uses, never by reading destinations. Messages enqueued before that hash existed are not found.
         */
        post: operations["searchMessagesByDestination"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/platform-admin/security-outbox/delivery-events": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** Provider events (delivered, bounced, complained…) received over a window, per provider, channel and event */
        get: operations["countDeliveryEvents"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/platform-admin/security-outbox/dead-letters/redrives": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Reissue up to 50 dead letters of one reason at once (audited, idempotent); those that cannot be reissued are counted
         * @description Each dead letter goes through the single reissue (same checks, same audit record); one that it would refuse is skipped and counted by that refusal code. Go on with `after` = the answer’s `endCursor` while `hasMore`. The Idempotency-Key remembers the answer; a repeat answers it again with `Idempotent-Replayed: true` and does nothing.
         */
        post: operations["redriveDeadLetters"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/platform-admin/security-outbox/pauses": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** Each channel paused by a provider’s throttling, and until when */
        get: operations["listChannelPauses"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/platform-admin/security-outbox/channels/{channel}/pause": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        post?: never;
        /** End a channel's throttle pause now (audited); its held messages go out at once */
        delete: operations["liftChannelPause"];
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/platform-admin/security-outbox/providers/{provider}/hold": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        post?: never;
        /** Mark a provider held down as up (audited); its channel's held messages go out at once */
        delete: operations["liftProviderHold"];
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/platform-admin/security-outbox/send-caps": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /**
         * This hour's send cap use per scope and who asked (owner, stranger, courier), and the last hour's conversion per channel and prefix
         * @description Prefixes are cut to four digits, as the log lines show them: never a number (docs/operations.md "Runbook: a send cap is reached").
         */
        get: operations["getSendCaps"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/platform-admin/suppressions": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** Suppressed destinations, masked, newest first (keyset pages) */
        get: operations["listSuppressions"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/platform-admin/suppressions/{id}": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        post?: never;
        /** Lift a suppression (audited): messages to the destination are sent again */
        delete: operations["liftSuppression"];
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/platform-admin/audit-records": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** A keyset page of audit records, newest first, filtered by action, actor, subject and time */
        get: operations["listAuditRecords"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/platform-admin/people/exports": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Everything held about the person behind an identifier, as JSON (audited)
         * @description A POST so the identifier travels in the body, never in a URL an access log keeps.
         */
        post: operations["exportPerson"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/platform-admin/people/erasures": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /** Erase the person behind an identifier, in one transaction (audited under a random tombstone id) */
        post: operations["erasePerson"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/messages": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Deliver a one-time code or sign-in link (sealed on arrival, idempotent)
         * @description Needs an Idempotency-Key: a repeat with the same body answers the first `messageId` with `Idempotent-Replayed: true` and sends nothing more; the same key with another body is 422 `idempotency_key_reused` (docs/api.md "Idempotency-Key"). Keys are remembered for 24 hours. 202 means accepted for delivery, never delivered: follow it with GET /v1/messages/{messageId}.
         */
        post: operations["sendCourierMessage"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/messages/{messageId}": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** A message's state and attempts (destination masked), to the key that sent it */
        get: operations["getCourierMessage"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/platform-admin/api-keys": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** Every API key, newest first, without key material */
        get: operations["listApiKeys"];
        put?: never;
        /**
         * Issue an API key (audited): the key is in this answer only
         * @description A key scoped to `magic_link` needs `linkOrigins`. `sendsPerHour` and `destinationsPerHour` bound what a leaked key can do (docs/courier.md "Keys").
         */
        post: operations["createApiKey"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/platform-admin/api-keys/{id}/changes": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /** Change a live key's hourly volume, new addresses an hour or link origins (audited): the key itself stays */
        post: operations["changeApiKey"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/platform-admin/api-keys/{id}/rotation": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /** Replace a key (audited): a new key with the same scopes and limits, the old one revoked at once */
        post: operations["rotateApiKey"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/platform-admin/api-keys/{id}": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        post?: never;
        /** Revoke a key (audited): it stops working at once */
        delete: operations["revokeApiKey"];
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/platform-admin/webhook-endpoints": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** Every endpoint, newest first, with its pending and dead-lettered deliveries (no secrets) */
        get: operations["listWebhookEndpoints"];
        put?: never;
        /**
         * Subscribe an endpoint to event types; the signing secret is shown once (audited)
         * @description The URL must be https and its host must not resolve to a loopback, private or link-local address unless WEBHOOK_ALLOWED_HOSTS names it.
         */
        post: operations["createWebhookEndpoint"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/platform-admin/webhook-endpoints/{id}": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        post?: never;
        /** Disable an endpoint: it hears nothing more and its pending deliveries stop (audited) */
        delete: operations["disableWebhookEndpoint"];
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/platform-admin/webhook-endpoints/{id}/secret": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /** A new signing secret, shown once; the old one keeps signing beside it for an hour (audited) */
        post: operations["rotateWebhookSecret"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/platform-admin/webhook-endpoints/{id}/deliveries": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** The endpoint's recent deliveries, newest first: event type, webhook-id, state, attempts, last status (no payloads) */
        get: operations["listWebhookDeliveries"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/platform-admin/webhook-endpoints/{id}/redrives": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /** Send the endpoint's dead-lettered deliveries again, same webhook-id, attempts from zero (audited) */
        post: operations["redriveWebhookDeliveries"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/webhooks/ses": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Amazon SNS deliveries of SES events (signature verified; subscriptions confirmed only for SES_EVENTS_TOPIC_ARN)
         * @description SNS posts JSON as text/plain with x-amz-sns-message-type. Refusals (4xx) are final for SNS; an authentic event for a message we do not know is 200 unknown_message; a certificate that cannot be fetched is 503 so SNS retries.
         */
        post: operations["receiveSesEvent"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/webhooks/wasender": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Wasender message status updates (X-Webhook-Signature must equal WASENDER_WEBHOOK_SECRET)
         * @description The signature is checked first (403); then a body other than `application/json` is 415 and one that does not match the schema is 400 `malformed`.
         */
        post: operations["receiveWasenderStatus"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/webhooks/whatsapp-cloud": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** Meta's webhook subscription handshake (hub.verify_token must equal WHATSAPP_CLOUD_VERIFY_TOKEN) */
        get: operations["verifyWhatsAppCloudSubscription"];
        put?: never;
        /**
         * WhatsApp Cloud API message status webhooks (X-Hub-Signature-256 under WHATSAPP_CLOUD_APP_SECRET)
         * @description The signature covers the raw body and is checked first (403, nothing stored); a signed body that is not JSON is 400 `malformed`. Statuses (delivered, read, failed) are stored once; a status older than seven days is ignored.
         */
        post: operations["receiveWhatsAppCloudStatus"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/webhooks/twilio": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Twilio message status callbacks (X-Twilio-Signature with TWILIO_AUTH_TOKEN over PUBLIC_BASE_URL/webhooks/twilio)
         * @description The signature is checked first (403), over the URL built from PUBLIC_BASE_URL, never the Host header; then a body other than form-encoded is 415. A replay of a status is 200 `duplicate`; a sid we never sent is 200 `unknown_message`.
         */
        post: operations["receiveTwilioStatus"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/hooks/supabase/send-email": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Supabase Auth's Send Email Hook (Standard Webhooks signature under SUPABASE_HOOK_SECRET)
         * @description Verified before anything is read; each `email_action_type` becomes one message (two for a secure email change; a `*_notification` a security notice). A deliberate refusal (a budget, a number that cannot receive codes, an unavailable channel, an unknown kind, a kind an older worker still running cannot send yet) answers **200** with `{code, error: {http_code, message}}`, the only refusal Supabase shows its user (docs/hooks.md). A retry of the same message sends nothing twice.
         */
        post: operations["receiveSupabaseSendEmail"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/hooks/supabase/send-sms": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Supabase Auth's Send SMS Hook (Standard Webhooks signature under SUPABASE_HOOK_SECRET)
         * @description A deliberate refusal (a budget, a number that cannot receive codes, an unavailable channel, an unknown kind, a kind an older worker still running cannot send yet) answers **200** with `{code, error: {http_code, message}}`, the only refusal Supabase shows its user (docs/hooks.md). A retry of the same message sends nothing twice.
         */
        post: operations["receiveSupabaseSendSms"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/hooks/kratos/courier": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /** Ory Kratos' HTTP courier (Authorization: Bearer KRATOS_COURIER_API_KEY, or basic auth with it as the password) */
        post: operations["receiveKratosCourierMessage"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/healthz": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** Liveness: the process runs (never touches the database) */
        get: operations["liveness"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/readyz": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** Readiness: the database answers */
        get: operations["readiness"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/openapi.json": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** This OpenAPI 3.1 document (rendered at /docs where enabled) */
        get: operations["getOpenApiDocument"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/metrics": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** Prometheus metrics of the web process, with the database-derived outbox gauges */
        get: operations["getMetrics"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
}
export type webhooks = Record<string, never>;
export interface components {
    schemas: {
        PersonRequest: {
            /** @description Any identifier of the person (email or E.164 phone) */
            identifier: string;
        };
        /** @description Accepted for delivery (not delivered yet); the code expires at this time */
        ChallengeAccepted: {
            /** Format: date-time */
            challengeExpiresAt: string;
        };
        /** @description RFC 9457 problem details */
        Problem: {
            /** @description `https://sealpost.dev/problems/<code>` */
            type: string;
            title: string;
            status: number;
            /** @description Stable machine-readable reason */
            code: string;
            /** @description For `invalid_request`: which fields are wrong */
            errors?: {
                pointer: string;
                detail: string;
            }[];
            /** @description The /hooks/ routes: the same refusal in the shape Supabase Auth reads from a hook */
            error?: {
                http_code: number;
                message: string;
            };
        };
        SessionCreated: {
            token: string;
            /** Format: date-time */
            expiresAt: string;
        };
        /** @description The caller's live sessions, newest first (at most 100); never a token */
        SessionList: {
            sessions: {
                /** Format: uuid */
                id: string;
                /** Format: date-time */
                createdAt: string;
                /**
                 * Format: date-time
                 * @description Marked at most once a minute
                 */
                lastUsedAt: string;
                /**
                 * Format: date-time
                 * @description The absolute expiry; an idle session ends 30 minutes after its last use first
                 */
                expiresAt: string;
                /** @description The session of this request */
                current: boolean;
            }[];
        };
        SignInMethodAdded: {
            identifier: string;
            /** @enum {string} */
            kind: "email" | "phone";
        };
        ElevationCreated: {
            elevationToken: string;
            /** Format: date-time */
            expiresAt: string;
        };
        OrganizationCreated: {
            /** Format: uuid */
            id: string;
        };
        InvitationAccepted: {
            /** Format: uuid */
            invitationId: string;
            /** Format: date-time */
            expiresAt: string;
        };
        MembershipCreated: {
            /** Format: uuid */
            organizationId: string;
        };
        Backlog: {
            states: {
                pending: number;
                leased: number;
                published: number;
                dead_lettered: number;
            };
            /** @description Age of the oldest pending message that is due; null when none is */
            oldestDuePendingAgeSeconds: number | null;
            deadLettersLast24h: {
                provider_rejected: number;
                retries_exhausted: number;
                challenge_expired: number;
                challenge_consumed: number;
                decryption_failed: number;
                superseded_by_resend: number;
                worker_crash_loop: number;
                invitation_revoked: number;
                invitation_accepted: number;
                invitation_expired: number;
                destination_suppressed: number;
            };
            /** @description Provider delivery events received in the last 24 hours, per purpose and event */
            deliveryEventsLast24h: {
                [key: string]: {
                    [key: string]: number;
                };
            };
            /** @description pg-boss jobs of the delivery queue */
            queue: {
                queued: number;
                deferred: number;
                active: number;
                failed: number;
            };
            /** @description Each provider a worker has used, its breaker and its throttle pause */
            providers: {
                /** @enum {string} */
                provider: "ses" | "smtp" | "wasender" | "twilio" | "whatsapp_cloud";
                /** @enum {string} */
                channel: "email" | "whatsapp" | "sms";
                /**
                 * @description The breaker: up (closed); down (open: held, its messages wait without spending attempts); probing (half-open: a few messages test it)
                 * @enum {string}
                 */
                state: "up" | "probing" | "down";
                /** @description The provider-side failures of the window that held it (0 while up) */
                failureStreak: number;
                downSince: string | null;
                nextProbeAt: string | null;
                /** @description The end of the provider's throttle pause, while one runs */
                pausedUntil: string | null;
            }[];
        };
        DeadLetterPage: {
            items: {
                /** Format: uuid */
                messageId: string;
                /** @enum {string} */
                purpose: "sign_up" | "add_sign_in_method" | "password_recovery" | "step_up" | "invitation" | "security_notice" | "verification_code" | "magic_link";
                /** @enum {string} */
                channel: "email" | "whatsapp" | "sms";
                /**
                 * @description The destination with most characters replaced by •, masked in the database
                 * @example a•••e@e•••.com
                 */
                maskedDestination: string;
                attemptCount: number;
                /** @enum {string} */
                reason: "provider_rejected" | "retries_exhausted" | "challenge_expired" | "challenge_consumed" | "decryption_failed" | "superseded_by_resend" | "worker_crash_loop" | "invitation_revoked" | "invitation_accepted" | "invitation_expired" | "destination_suppressed";
                lastFailureClass: ("REJECTED" | "THROTTLED" | "UNAVAILABLE" | "INDETERMINATE" | "unexpected_worker_error" | "invitation_link_unconfigured") | null;
                /** Format: date-time */
                deadLetteredAt: string;
                /** Format: date-time */
                expiresAt: string;
            }[];
            pageInfo: {
                hasNextPage: boolean;
                hasPreviousPage: boolean;
                startCursor: string | null;
                endCursor: string | null;
            };
        };
        MessageHistory: {
            message: {
                /** Format: uuid */
                messageId: string;
                /** @enum {string} */
                purpose: "sign_up" | "add_sign_in_method" | "password_recovery" | "step_up" | "invitation" | "security_notice" | "verification_code" | "magic_link";
                /** @enum {string} */
                channel: "email" | "whatsapp" | "sms";
                /**
                 * @description The destination with most characters replaced by •, masked in the database
                 * @example a•••e@e•••.com
                 */
                maskedDestination: string;
                locale: string;
                /** @enum {string} */
                state: "pending" | "leased" | "published" | "dead_lettered";
                attemptCount: number;
                /** Format: date-time */
                createdAt: string;
                /** Format: date-time */
                availableAt: string;
                publishedAt: string | null;
                deadLetteredAt: string | null;
                /** Format: date-time */
                expiresAt: string;
            };
            attempts: {
                attemptNo: number;
                /** @description The provider it went to; null for attempts recorded before providers were named */
                provider: ("ses" | "smtp" | "wasender" | "twilio" | "whatsapp_cloud") | null;
                /**
                 * @description The channel it went out on: a phone code may fall back from whatsapp to sms (the message's channel stays the one it was sealed for)
                 * @enum {string}
                 */
                channel: "email" | "whatsapp" | "sms";
                /** @enum {string} */
                outcome: "published" | "retryable_error" | "failed";
                failureClass: ("REJECTED" | "THROTTLED" | "UNAVAILABLE" | "INDETERMINATE" | "unexpected_worker_error" | "invitation_link_unconfigured") | null;
                providerMessageId: string | null;
                retryAfterAt: string | null;
                durationMs: number;
                /** Format: date-time */
                attemptedAt: string;
            }[];
            deadLetter: {
                /** @enum {string} */
                reason: "provider_rejected" | "retries_exhausted" | "challenge_expired" | "challenge_consumed" | "decryption_failed" | "superseded_by_resend" | "worker_crash_loop" | "invitation_revoked" | "invitation_accepted" | "invitation_expired" | "destination_suppressed";
                lastFailureClass: ("REJECTED" | "THROTTLED" | "UNAVAILABLE" | "INDETERMINATE" | "unexpected_worker_error" | "invitation_link_unconfigured") | null;
                /** Format: date-time */
                deadLetteredAt: string;
            } | null;
            /** @description What the provider reported after it accepted the message */
            events: {
                /** @enum {string} */
                event: "delivered" | "bounced" | "complained" | "rejected" | "delayed";
                subtype: string | null;
                /** Format: date-time */
                occurredAt: string;
                /** Format: date-time */
                receivedAt: string;
            }[];
        };
        /** @description The new message, accepted for delivery with a fresh code */
        Reissued: {
            /** Format: uuid */
            messageId: string;
            /** Format: date-time */
            challengeExpiresAt: string;
        };
        MessageSearchPage: {
            items: {
                /** Format: uuid */
                messageId: string;
                /** @enum {string} */
                purpose: "sign_up" | "add_sign_in_method" | "password_recovery" | "step_up" | "invitation" | "security_notice" | "verification_code" | "magic_link";
                /** @enum {string} */
                channel: "email" | "whatsapp" | "sms";
                /**
                 * @description Masked in the database
                 * @example a•••e@e•••.com
                 */
                maskedDestination: string;
                /** @enum {string} */
                state: "pending" | "leased" | "published" | "dead_lettered";
                attemptCount: number;
                lastFailureClass: ("REJECTED" | "THROTTLED" | "UNAVAILABLE" | "INDETERMINATE" | "unexpected_worker_error" | "invitation_link_unconfigured") | null;
                deadLetterReason: ("provider_rejected" | "retries_exhausted" | "challenge_expired" | "challenge_consumed" | "decryption_failed" | "superseded_by_resend" | "worker_crash_loop" | "invitation_revoked" | "invitation_accepted" | "invitation_expired" | "destination_suppressed") | null;
                /** @description The provider of each attempt, in order: its path */
                providers: ("ses" | "smtp" | "wasender" | "twilio" | "whatsapp_cloud")[];
                /** Format: date-time */
                createdAt: string;
                /** Format: date-time */
                expiresAt: string;
            }[];
            pageInfo: {
                hasNextPage: boolean;
                endCursor: string | null;
            };
        };
        DeliveryCounts: {
            /** Format: date-time */
            since: string;
            /** Format: date-time */
            until: string;
            counts: {
                /** @description The provider whose sent attempt the event matched (`unknown` before providers were named) */
                provider: string;
                /** @enum {string} */
                channel: "email" | "whatsapp" | "sms";
                /** @enum {string} */
                event: "delivered" | "bounced" | "complained" | "rejected" | "delayed";
                count: number;
            }[];
        };
        Redriven: {
            /** @enum {string} */
            reason: "provider_rejected" | "retries_exhausted" | "challenge_expired" | "challenge_consumed" | "decryption_failed" | "superseded_by_resend" | "worker_crash_loop" | "invitation_revoked" | "invitation_accepted" | "invitation_expired" | "destination_suppressed";
            considered: number;
            reissued: number;
            /** @description Dead letters not reissued, by the refusal code a single reissue would answer */
            skipped: {
                [key: string]: number;
            };
            endCursor: string | null;
            hasMore: boolean;
        };
        ChannelPauses: {
            items: {
                /** @enum {string} */
                channel: "email" | "whatsapp" | "sms";
                /** @description The provider paused; null for a whole channel's pause (written by a worker of the previous release) */
                provider: ("ses" | "smtp" | "wasender" | "twilio" | "whatsapp_cloud") | null;
                /** Format: date-time */
                pausedUntil: string;
                throttleStreak: number;
            }[];
        };
        Released: {
            /** @description The channel's held messages called back to go out now */
            released: number;
        };
        AuditRecordPage: {
            items: {
                /** Format: uuid */
                id: string;
                /** Format: date-time */
                at: string;
                actor: string;
                action: string;
                subject: string | null;
                /** @description Ids, reasons and counts; never a code, token or address */
                details: {
                    [key: string]: unknown;
                };
            }[];
            pageInfo: {
                hasNextPage: boolean;
                endCursor: string | null;
            };
        };
        /** @description What is held about a person (GDPR Art. 15); never a code, token, password hash or envelope */
        PersonExport: {
            identity: {
                /** Format: uuid */
                id: string;
                status: string;
                /** @description An ISO 8601 instant */
                createdAt: string;
            };
            identifiers: {
                /** @enum {string} */
                kind: "email" | "phone";
                value: string;
                verifiedAt: string | null;
                /** @description An ISO 8601 instant */
                createdAt: string;
            }[];
            password: {
                set: boolean;
                updatedAt: string | null;
            };
            sessions: {
                [key: string]: unknown;
            }[];
            devices: {
                [key: string]: unknown;
            }[];
            challenges: {
                [key: string]: unknown;
            }[];
            messages: {
                [key: string]: unknown;
            }[];
            suppressions: {
                [key: string]: unknown;
            }[];
            memberships: {
                [key: string]: unknown;
            }[];
            invitations: {
                [key: string]: unknown;
            }[];
            staff: {
                /** @description An ISO 8601 instant */
                grantedAt: string;
                revokedAt: string | null;
            } | null;
            auditRecords: {
                [key: string]: unknown;
            }[];
        };
        PersonErased: {
            /**
             * Format: uuid
             * @description The random id that stands for the person in what is kept (organizations, invitations sent, the audit trail)
             */
            tombstoneId: string;
            /** @description Rows erased (or pseudonymised) per kind */
            erased: {
                [key: string]: number;
            };
        };
        WebhookEndpointCreated: {
            /** Format: uuid */
            id: string;
            /** @description The signing secret, `whsec_…`: shown this once, never again */
            secret: string;
        };
        WebhookEndpointList: {
            items: {
                /** Format: uuid */
                id: string;
                url: string;
                events: ("message.accepted" | "message.published" | "message.delivered" | "message.bounced" | "message.complained" | "message.dead_lettered" | "destination.suppressed" | "identity.created" | "sign_in_method.added" | "sign_in_method.removed" | "password.changed" | "sessions.revoked" | "invitation.accepted")[];
                /** Format: date-time */
                createdAt: string;
                disabledAt: string | null;
                pendingDeliveries: number;
                deadLetteredDeliveries: number;
            }[];
        };
        WebhookSecretRotated: {
            /** Format: uuid */
            id: string;
            /** @description The new signing secret, `whsec_…`: shown this once */
            secret: string;
            /**
             * Format: date-time
             * @description Until then deliveries carry a signature under the old secret too
             */
            previousSecretExpiresAt: string;
        };
        WebhookDeliveryList: {
            items: {
                /**
                 * Format: uuid
                 * @description The `webhook-id` header: the event id, the same on every retry
                 */
                webhookId: string;
                /** @enum {string} */
                eventType: "message.accepted" | "message.published" | "message.delivered" | "message.bounced" | "message.complained" | "message.dead_lettered" | "destination.suppressed" | "identity.created" | "sign_in_method.added" | "sign_in_method.removed" | "password.changed" | "sessions.revoked" | "invitation.accepted";
                /** Format: date-time */
                occurredAt: string;
                /** @enum {string} */
                state: "pending" | "delivered" | "dead_lettered";
                attempts: number;
                nextAttemptAt: string | null;
                lastStatusCode: number | null;
                lastFailure: string | null;
                finishedAt: string | null;
            }[];
        };
        WebhookRedriven: {
            redriven: number;
        };
    };
    responses: never;
    parameters: never;
    requestBodies: never;
    headers: never;
    pathItems: never;
}
export type $defs = Record<string, never>;
export interface operations {
    startSignUp: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": {
                    /** @description An email address or an E.164 phone number (+ and 8–15 digits) */
                    identifier: string;
                    /** @description At least 12 characters (Unicode code points after NFC, a run of spaces counting once), not found in a known breach when that check is configured */
                    password: string;
                };
            };
        };
        responses: {
            /** @description Accepted: a code is on its way (not yet delivered) */
            202: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ChallengeAccepted"];
                };
            };
            /** @description Refused: `malformed_json`, `malformed_encoding`, `malformed_path`, `bad_request` */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 400;
                        /** @enum {string} */
                        code: "malformed_json" | "malformed_encoding" | "malformed_path" | "bad_request";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `payload_too_large` */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 413;
                        /** @enum {string} */
                        code: "payload_too_large";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `bad_request` */
            415: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 415;
                        /** @enum {string} */
                        code: "bad_request";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `invalid_request`, `invalid_identifier`, `unsupported_phone_number`, `channel_unavailable`, `weak_password`, `breached_password` */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 422;
                        /** @enum {string} */
                        code: "invalid_request" | "invalid_identifier" | "unsupported_phone_number" | "channel_unavailable" | "weak_password" | "breached_password";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `too_many_requests`, `rate_limited`, `resend_too_soon`, `too_many_resends` */
            429: {
                headers: {
                    /** @description Seconds to wait before trying again. */
                    "Retry-After": string;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 429;
                        /** @enum {string} */
                        code: "too_many_requests" | "rate_limited" | "resend_too_soon" | "too_many_resends";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `headers_too_large` */
            431: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 431;
                        /** @enum {string} */
                        code: "headers_too_large";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `service_unavailable` */
            503: {
                headers: {
                    /** @description Seconds to wait before trying again. */
                    "Retry-After": string;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 503;
                        /** @enum {string} */
                        code: "service_unavailable";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
        };
    };
    confirmSignUp: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": {
                    /** @description An email address or an E.164 phone number (+ and 8–15 digits) */
                    identifier: string;
                    /** @description The 6-digit code */
                    code: string;
                    password: string;
                };
            };
        };
        responses: {
            /** @description Signed up and signed in */
            201: {
                headers: {
                    /** @description The device cookie (`sealpost_device`, HttpOnly, SameSite=Strict, Secure outside development, 90 days): a client that sends it back on its next requests spends budgets of its own on this account — sign-in failures, codes to its addresses, wrong codes — which strangers cannot exhaust. It grants no access by itself. */
                    "Set-Cookie": string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["SessionCreated"];
                };
            };
            /** @description Refused: `malformed_json`, `malformed_encoding`, `malformed_path`, `bad_request` */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 400;
                        /** @enum {string} */
                        code: "malformed_json" | "malformed_encoding" | "malformed_path" | "bad_request";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `identifier_taken` */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 409;
                        /** @enum {string} */
                        code: "identifier_taken";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `payload_too_large` */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 413;
                        /** @enum {string} */
                        code: "payload_too_large";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `bad_request` */
            415: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 415;
                        /** @enum {string} */
                        code: "bad_request";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `invalid_request`, `invalid_identifier`, `unsupported_phone_number`, `invalid_code` */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 422;
                        /** @enum {string} */
                        code: "invalid_request" | "invalid_identifier" | "unsupported_phone_number" | "invalid_code";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `too_many_requests` */
            429: {
                headers: {
                    /** @description Seconds to wait before trying again. */
                    "Retry-After": string;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 429;
                        /** @enum {string} */
                        code: "too_many_requests";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `headers_too_large` */
            431: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 431;
                        /** @enum {string} */
                        code: "headers_too_large";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `service_unavailable` */
            503: {
                headers: {
                    /** @description Seconds to wait before trying again. */
                    "Retry-After": string;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 503;
                        /** @enum {string} */
                        code: "service_unavailable";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
        };
    };
    listSessions: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The sessions */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["SessionList"];
                };
            };
            /** @description Refused: `malformed_json`, `malformed_encoding`, `malformed_path`, `bad_request` */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 400;
                        /** @enum {string} */
                        code: "malformed_json" | "malformed_encoding" | "malformed_path" | "bad_request";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `unauthenticated` */
            401: {
                headers: {
                    /** @description The bearer scheme is expected */
                    "WWW-Authenticate": "Bearer";
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 401;
                        /** @enum {string} */
                        code: "unauthenticated";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `payload_too_large` */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 413;
                        /** @enum {string} */
                        code: "payload_too_large";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `bad_request` */
            415: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 415;
                        /** @enum {string} */
                        code: "bad_request";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `headers_too_large` */
            431: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 431;
                        /** @enum {string} */
                        code: "headers_too_large";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `service_unavailable` */
            503: {
                headers: {
                    /** @description Seconds to wait before trying again. */
                    "Retry-After": string;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 503;
                        /** @enum {string} */
                        code: "service_unavailable";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
        };
    };
    signIn: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": {
                    /** @description An email address or an E.164 phone number (+ and 8–15 digits) */
                    identifier: string;
                    password: string;
                };
            };
        };
        responses: {
            /** @description Signed in */
            201: {
                headers: {
                    /** @description The device cookie (`sealpost_device`, HttpOnly, SameSite=Strict, Secure outside development, 90 days): a client that sends it back on its next requests spends budgets of its own on this account — sign-in failures, codes to its addresses, wrong codes — which strangers cannot exhaust. It grants no access by itself. */
                    "Set-Cookie": string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["SessionCreated"];
                };
            };
            /** @description Refused: `malformed_json`, `malformed_encoding`, `malformed_path`, `bad_request` */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 400;
                        /** @enum {string} */
                        code: "malformed_json" | "malformed_encoding" | "malformed_path" | "bad_request";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `invalid_credentials` */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 401;
                        /** @enum {string} */
                        code: "invalid_credentials";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `payload_too_large` */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 413;
                        /** @enum {string} */
                        code: "payload_too_large";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `bad_request` */
            415: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 415;
                        /** @enum {string} */
                        code: "bad_request";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `invalid_request`, `invalid_identifier` */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 422;
                        /** @enum {string} */
                        code: "invalid_request" | "invalid_identifier";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `too_many_requests` */
            429: {
                headers: {
                    /** @description Seconds to wait before trying again. */
                    "Retry-After": string;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 429;
                        /** @enum {string} */
                        code: "too_many_requests";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `headers_too_large` */
            431: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 431;
                        /** @enum {string} */
                        code: "headers_too_large";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `service_unavailable` */
            503: {
                headers: {
                    /** @description Seconds to wait before trying again. */
                    "Retry-After": string;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 503;
                        /** @enum {string} */
                        code: "service_unavailable";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
        };
    };
    signOutEverywhere: {
        parameters: {
            query?: never;
            header: {
                /** @description The elevation token from POST /step-ups/confirmation (valid 5 minutes, bound to the session). */
                "X-Elevation-Token": string;
            };
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Signed out everywhere */
            204: {
                headers: {
                    [name: string]: unknown;
                };
                content?: never;
            };
            /** @description Refused: `malformed_json`, `malformed_encoding`, `malformed_path`, `bad_request` */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 400;
                        /** @enum {string} */
                        code: "malformed_json" | "malformed_encoding" | "malformed_path" | "bad_request";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `unauthenticated` */
            401: {
                headers: {
                    /** @description The bearer scheme is expected */
                    "WWW-Authenticate": "Bearer";
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 401;
                        /** @enum {string} */
                        code: "unauthenticated";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `elevation_required` */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 403;
                        /** @enum {string} */
                        code: "elevation_required";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `payload_too_large` */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 413;
                        /** @enum {string} */
                        code: "payload_too_large";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `bad_request` */
            415: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 415;
                        /** @enum {string} */
                        code: "bad_request";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `headers_too_large` */
            431: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 431;
                        /** @enum {string} */
                        code: "headers_too_large";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `service_unavailable` */
            503: {
                headers: {
                    /** @description Seconds to wait before trying again. */
                    "Retry-After": string;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 503;
                        /** @enum {string} */
                        code: "service_unavailable";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
        };
    };
    signOut: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Signed out */
            204: {
                headers: {
                    [name: string]: unknown;
                };
                content?: never;
            };
            /** @description Refused: `malformed_json`, `malformed_encoding`, `malformed_path`, `bad_request` */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 400;
                        /** @enum {string} */
                        code: "malformed_json" | "malformed_encoding" | "malformed_path" | "bad_request";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `unauthenticated` */
            401: {
                headers: {
                    /** @description The bearer scheme is expected */
                    "WWW-Authenticate": "Bearer";
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 401;
                        /** @enum {string} */
                        code: "unauthenticated";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `payload_too_large` */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 413;
                        /** @enum {string} */
                        code: "payload_too_large";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `bad_request` */
            415: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 415;
                        /** @enum {string} */
                        code: "bad_request";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `headers_too_large` */
            431: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 431;
                        /** @enum {string} */
                        code: "headers_too_large";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `service_unavailable` */
            503: {
                headers: {
                    /** @description Seconds to wait before trying again. */
                    "Retry-After": string;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 503;
                        /** @enum {string} */
                        code: "service_unavailable";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
        };
    };
    addSignInMethod: {
        parameters: {
            query?: never;
            header: {
                /** @description The elevation token from POST /step-ups/confirmation (valid 5 minutes, bound to the session). */
                "X-Elevation-Token": string;
            };
            path?: never;
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": {
                    /** @description An email address or an E.164 phone number (+ and 8–15 digits) */
                    identifier: string;
                };
            };
        };
        responses: {
            /** @description Accepted: a code is on its way (not yet delivered) */
            202: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ChallengeAccepted"];
                };
            };
            /** @description Refused: `malformed_json`, `malformed_encoding`, `malformed_path`, `bad_request` */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 400;
                        /** @enum {string} */
                        code: "malformed_json" | "malformed_encoding" | "malformed_path" | "bad_request";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `unauthenticated` */
            401: {
                headers: {
                    /** @description The bearer scheme is expected */
                    "WWW-Authenticate": "Bearer";
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 401;
                        /** @enum {string} */
                        code: "unauthenticated";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `elevation_required` */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 403;
                        /** @enum {string} */
                        code: "elevation_required";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `identifier_already_added` */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 409;
                        /** @enum {string} */
                        code: "identifier_already_added";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `payload_too_large` */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 413;
                        /** @enum {string} */
                        code: "payload_too_large";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `bad_request` */
            415: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 415;
                        /** @enum {string} */
                        code: "bad_request";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `invalid_request`, `invalid_identifier`, `unsupported_phone_number`, `channel_unavailable` */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 422;
                        /** @enum {string} */
                        code: "invalid_request" | "invalid_identifier" | "unsupported_phone_number" | "channel_unavailable";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `rate_limited`, `resend_too_soon`, `too_many_resends`, `identity_rate_limited` */
            429: {
                headers: {
                    /** @description Seconds to wait before trying again. */
                    "Retry-After": string;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 429;
                        /** @enum {string} */
                        code: "rate_limited" | "resend_too_soon" | "too_many_resends" | "identity_rate_limited";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `headers_too_large` */
            431: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 431;
                        /** @enum {string} */
                        code: "headers_too_large";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `service_unavailable` */
            503: {
                headers: {
                    /** @description Seconds to wait before trying again. */
                    "Retry-After": string;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 503;
                        /** @enum {string} */
                        code: "service_unavailable";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
        };
    };
    confirmSignInMethod: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": {
                    /** @description An email address or an E.164 phone number (+ and 8–15 digits) */
                    identifier: string;
                    /** @description The 6-digit code */
                    code: string;
                };
            };
        };
        responses: {
            /** @description Added */
            201: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["SignInMethodAdded"];
                };
            };
            /** @description Refused: `malformed_json`, `malformed_encoding`, `malformed_path`, `bad_request` */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 400;
                        /** @enum {string} */
                        code: "malformed_json" | "malformed_encoding" | "malformed_path" | "bad_request";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `unauthenticated` */
            401: {
                headers: {
                    /** @description The bearer scheme is expected */
                    "WWW-Authenticate": "Bearer";
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 401;
                        /** @enum {string} */
                        code: "unauthenticated";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `identifier_taken` */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 409;
                        /** @enum {string} */
                        code: "identifier_taken";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `payload_too_large` */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 413;
                        /** @enum {string} */
                        code: "payload_too_large";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `bad_request` */
            415: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 415;
                        /** @enum {string} */
                        code: "bad_request";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `invalid_request`, `invalid_identifier`, `unsupported_phone_number`, `invalid_code` */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 422;
                        /** @enum {string} */
                        code: "invalid_request" | "invalid_identifier" | "unsupported_phone_number" | "invalid_code";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `too_many_wrong_codes` */
            429: {
                headers: {
                    /** @description Seconds to wait before trying again. */
                    "Retry-After": string;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 429;
                        /** @enum {string} */
                        code: "too_many_wrong_codes";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `headers_too_large` */
            431: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 431;
                        /** @enum {string} */
                        code: "headers_too_large";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `service_unavailable` */
            503: {
                headers: {
                    /** @description Seconds to wait before trying again. */
                    "Retry-After": string;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 503;
                        /** @enum {string} */
                        code: "service_unavailable";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
        };
    };
    removeSignInMethod: {
        parameters: {
            query?: never;
            header: {
                /** @description The elevation token from POST /step-ups/confirmation (valid 5 minutes, bound to the session). */
                "X-Elevation-Token": string;
            };
            path?: never;
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": {
                    /** @description An email address or an E.164 phone number (+ and 8–15 digits) */
                    identifier: string;
                };
            };
        };
        responses: {
            /** @description Removed: it no longer signs in */
            204: {
                headers: {
                    [name: string]: unknown;
                };
                content?: never;
            };
            /** @description Refused: `malformed_json`, `malformed_encoding`, `malformed_path`, `bad_request` */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 400;
                        /** @enum {string} */
                        code: "malformed_json" | "malformed_encoding" | "malformed_path" | "bad_request";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `unauthenticated` */
            401: {
                headers: {
                    /** @description The bearer scheme is expected */
                    "WWW-Authenticate": "Bearer";
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 401;
                        /** @enum {string} */
                        code: "unauthenticated";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `elevation_required` */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 403;
                        /** @enum {string} */
                        code: "elevation_required";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `sign_in_method_not_found` */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 404;
                        /** @enum {string} */
                        code: "sign_in_method_not_found";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `primary_identifier` */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 409;
                        /** @enum {string} */
                        code: "primary_identifier";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `payload_too_large` */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 413;
                        /** @enum {string} */
                        code: "payload_too_large";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `bad_request` */
            415: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 415;
                        /** @enum {string} */
                        code: "bad_request";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `invalid_request`, `invalid_identifier` */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 422;
                        /** @enum {string} */
                        code: "invalid_request" | "invalid_identifier";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `headers_too_large` */
            431: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 431;
                        /** @enum {string} */
                        code: "headers_too_large";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `service_unavailable` */
            503: {
                headers: {
                    /** @description Seconds to wait before trying again. */
                    "Retry-After": string;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 503;
                        /** @enum {string} */
                        code: "service_unavailable";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
        };
    };
    requestPasswordRecovery: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": {
                    /** @description An email address or an E.164 phone number (+ and 8–15 digits) */
                    identifier: string;
                };
            };
        };
        responses: {
            /** @description Accepted: a code is on its way (not yet delivered) */
            202: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ChallengeAccepted"];
                };
            };
            /** @description Refused: `malformed_json`, `malformed_encoding`, `malformed_path`, `bad_request` */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 400;
                        /** @enum {string} */
                        code: "malformed_json" | "malformed_encoding" | "malformed_path" | "bad_request";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `payload_too_large` */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 413;
                        /** @enum {string} */
                        code: "payload_too_large";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `bad_request` */
            415: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 415;
                        /** @enum {string} */
                        code: "bad_request";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `invalid_request`, `invalid_identifier`, `unsupported_phone_number`, `channel_unavailable` */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 422;
                        /** @enum {string} */
                        code: "invalid_request" | "invalid_identifier" | "unsupported_phone_number" | "channel_unavailable";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `too_many_requests`, `rate_limited`, `resend_too_soon`, `too_many_resends` */
            429: {
                headers: {
                    /** @description Seconds to wait before trying again. */
                    "Retry-After": string;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 429;
                        /** @enum {string} */
                        code: "too_many_requests" | "rate_limited" | "resend_too_soon" | "too_many_resends";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `headers_too_large` */
            431: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 431;
                        /** @enum {string} */
                        code: "headers_too_large";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `service_unavailable` */
            503: {
                headers: {
                    /** @description Seconds to wait before trying again. */
                    "Retry-After": string;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 503;
                        /** @enum {string} */
                        code: "service_unavailable";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
        };
    };
    completePasswordRecovery: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": {
                    /** @description An email address or an E.164 phone number (+ and 8–15 digits) */
                    identifier: string;
                    /** @description The 6-digit code */
                    code: string;
                    /** @description At least 12 characters (Unicode code points after NFC, a run of spaces counting once), not found in a known breach when that check is configured */
                    newPassword: string;
                };
            };
        };
        responses: {
            /** @description Password changed */
            204: {
                headers: {
                    /** @description The device cookie (`sealpost_device`, HttpOnly, SameSite=Strict, Secure outside development, 90 days): a client that sends it back on its next requests spends budgets of its own on this account — sign-in failures, codes to its addresses, wrong codes — which strangers cannot exhaust. It grants no access by itself. */
                    "Set-Cookie": string;
                    [name: string]: unknown;
                };
                content?: never;
            };
            /** @description Refused: `malformed_json`, `malformed_encoding`, `malformed_path`, `bad_request` */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 400;
                        /** @enum {string} */
                        code: "malformed_json" | "malformed_encoding" | "malformed_path" | "bad_request";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `payload_too_large` */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 413;
                        /** @enum {string} */
                        code: "payload_too_large";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `bad_request` */
            415: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 415;
                        /** @enum {string} */
                        code: "bad_request";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `invalid_request`, `invalid_identifier`, `unsupported_phone_number`, `invalid_code`, `weak_password`, `breached_password` */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 422;
                        /** @enum {string} */
                        code: "invalid_request" | "invalid_identifier" | "unsupported_phone_number" | "invalid_code" | "weak_password" | "breached_password";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `too_many_requests` */
            429: {
                headers: {
                    /** @description Seconds to wait before trying again. */
                    "Retry-After": string;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 429;
                        /** @enum {string} */
                        code: "too_many_requests";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `headers_too_large` */
            431: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 431;
                        /** @enum {string} */
                        code: "headers_too_large";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `service_unavailable` */
            503: {
                headers: {
                    /** @description Seconds to wait before trying again. */
                    "Retry-After": string;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 503;
                        /** @enum {string} */
                        code: "service_unavailable";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
        };
    };
    startStepUp: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: {
            content: {
                "application/json": Record<string, never>;
            };
        };
        responses: {
            /** @description Accepted: a code is on its way (not yet delivered) */
            202: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ChallengeAccepted"];
                };
            };
            /** @description Refused: `malformed_json`, `malformed_encoding`, `malformed_path`, `bad_request` */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 400;
                        /** @enum {string} */
                        code: "malformed_json" | "malformed_encoding" | "malformed_path" | "bad_request";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `unauthenticated` */
            401: {
                headers: {
                    /** @description The bearer scheme is expected */
                    "WWW-Authenticate": "Bearer";
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 401;
                        /** @enum {string} */
                        code: "unauthenticated";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `no_verified_identifier` */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 409;
                        /** @enum {string} */
                        code: "no_verified_identifier";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `payload_too_large` */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 413;
                        /** @enum {string} */
                        code: "payload_too_large";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `bad_request` */
            415: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 415;
                        /** @enum {string} */
                        code: "bad_request";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `invalid_request` */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 422;
                        /** @enum {string} */
                        code: "invalid_request";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `rate_limited`, `resend_too_soon`, `too_many_resends`, `identity_rate_limited` */
            429: {
                headers: {
                    /** @description Seconds to wait before trying again. */
                    "Retry-After": string;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 429;
                        /** @enum {string} */
                        code: "rate_limited" | "resend_too_soon" | "too_many_resends" | "identity_rate_limited";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `headers_too_large` */
            431: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 431;
                        /** @enum {string} */
                        code: "headers_too_large";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `service_unavailable` */
            503: {
                headers: {
                    /** @description Seconds to wait before trying again. */
                    "Retry-After": string;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 503;
                        /** @enum {string} */
                        code: "service_unavailable";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
        };
    };
    confirmStepUp: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": {
                    /** @description The 6-digit code */
                    code: string;
                };
            };
        };
        responses: {
            /** @description Elevated */
            201: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ElevationCreated"];
                };
            };
            /** @description Refused: `malformed_json`, `malformed_encoding`, `malformed_path`, `bad_request` */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 400;
                        /** @enum {string} */
                        code: "malformed_json" | "malformed_encoding" | "malformed_path" | "bad_request";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `unauthenticated` */
            401: {
                headers: {
                    /** @description The bearer scheme is expected */
                    "WWW-Authenticate": "Bearer";
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 401;
                        /** @enum {string} */
                        code: "unauthenticated";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `payload_too_large` */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 413;
                        /** @enum {string} */
                        code: "payload_too_large";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `bad_request` */
            415: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 415;
                        /** @enum {string} */
                        code: "bad_request";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `invalid_request`, `invalid_code` */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 422;
                        /** @enum {string} */
                        code: "invalid_request" | "invalid_code";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `too_many_wrong_codes` */
            429: {
                headers: {
                    /** @description Seconds to wait before trying again. */
                    "Retry-After": string;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 429;
                        /** @enum {string} */
                        code: "too_many_wrong_codes";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `headers_too_large` */
            431: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 431;
                        /** @enum {string} */
                        code: "headers_too_large";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `service_unavailable` */
            503: {
                headers: {
                    /** @description Seconds to wait before trying again. */
                    "Retry-After": string;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 503;
                        /** @enum {string} */
                        code: "service_unavailable";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
        };
    };
    forgetDevices: {
        parameters: {
            query?: never;
            header: {
                /** @description The elevation token from POST /step-ups/confirmation (valid 5 minutes, bound to the session). */
                "X-Elevation-Token": string;
            };
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Forgotten */
            204: {
                headers: {
                    [name: string]: unknown;
                };
                content?: never;
            };
            /** @description Refused: `malformed_json`, `malformed_encoding`, `malformed_path`, `bad_request` */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 400;
                        /** @enum {string} */
                        code: "malformed_json" | "malformed_encoding" | "malformed_path" | "bad_request";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `unauthenticated` */
            401: {
                headers: {
                    /** @description The bearer scheme is expected */
                    "WWW-Authenticate": "Bearer";
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 401;
                        /** @enum {string} */
                        code: "unauthenticated";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `elevation_required` */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 403;
                        /** @enum {string} */
                        code: "elevation_required";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `payload_too_large` */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 413;
                        /** @enum {string} */
                        code: "payload_too_large";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `bad_request` */
            415: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 415;
                        /** @enum {string} */
                        code: "bad_request";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `headers_too_large` */
            431: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 431;
                        /** @enum {string} */
                        code: "headers_too_large";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `service_unavailable` */
            503: {
                headers: {
                    /** @description Seconds to wait before trying again. */
                    "Retry-After": string;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 503;
                        /** @enum {string} */
                        code: "service_unavailable";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
        };
    };
    changePassword: {
        parameters: {
            query?: never;
            header: {
                /** @description The elevation token from POST /step-ups/confirmation (valid 5 minutes, bound to the session). */
                "X-Elevation-Token": string;
            };
            path?: never;
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": {
                    currentPassword: string;
                    /** @description At least 12 characters (Unicode code points after NFC, a run of spaces counting once), not found in a known breach when that check is configured */
                    newPassword: string;
                };
            };
        };
        responses: {
            /** @description Password changed; this client is trusted anew (every device was forgotten) */
            204: {
                headers: {
                    /** @description The device cookie (`sealpost_device`, HttpOnly, SameSite=Strict, Secure outside development, 90 days): a client that sends it back on its next requests spends budgets of its own on this account — sign-in failures, codes to its addresses, wrong codes — which strangers cannot exhaust. It grants no access by itself. */
                    "Set-Cookie": string;
                    [name: string]: unknown;
                };
                content?: never;
            };
            /** @description Refused: `malformed_json`, `malformed_encoding`, `malformed_path`, `bad_request` */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 400;
                        /** @enum {string} */
                        code: "malformed_json" | "malformed_encoding" | "malformed_path" | "bad_request";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `unauthenticated` */
            401: {
                headers: {
                    /** @description The bearer scheme is expected */
                    "WWW-Authenticate": "Bearer";
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 401;
                        /** @enum {string} */
                        code: "unauthenticated";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `elevation_required`, `wrong_password` */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 403;
                        /** @enum {string} */
                        code: "elevation_required" | "wrong_password";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `payload_too_large` */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 413;
                        /** @enum {string} */
                        code: "payload_too_large";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `bad_request` */
            415: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 415;
                        /** @enum {string} */
                        code: "bad_request";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `invalid_request`, `weak_password`, `breached_password` */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 422;
                        /** @enum {string} */
                        code: "invalid_request" | "weak_password" | "breached_password";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `identity_rate_limited` */
            429: {
                headers: {
                    /** @description Seconds to wait before trying again. */
                    "Retry-After": string;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 429;
                        /** @enum {string} */
                        code: "identity_rate_limited";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `headers_too_large` */
            431: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 431;
                        /** @enum {string} */
                        code: "headers_too_large";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `service_unavailable` */
            503: {
                headers: {
                    /** @description Seconds to wait before trying again. */
                    "Retry-After": string;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 503;
                        /** @enum {string} */
                        code: "service_unavailable";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
        };
    };
    createOrganization: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": {
                    /** @description Plain text, 1–100 characters after NFKC normalisation: no URLs, schemes, web or e-mail addresses, line or paragraph separators, bidi controls or invisible characters */
                    name: string;
                };
            };
        };
        responses: {
            /** @description Created */
            201: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["OrganizationCreated"];
                };
            };
            /** @description Refused: `malformed_json`, `malformed_encoding`, `malformed_path`, `bad_request` */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 400;
                        /** @enum {string} */
                        code: "malformed_json" | "malformed_encoding" | "malformed_path" | "bad_request";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `unauthenticated` */
            401: {
                headers: {
                    /** @description The bearer scheme is expected */
                    "WWW-Authenticate": "Bearer";
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 401;
                        /** @enum {string} */
                        code: "unauthenticated";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `payload_too_large` */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 413;
                        /** @enum {string} */
                        code: "payload_too_large";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `bad_request` */
            415: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 415;
                        /** @enum {string} */
                        code: "bad_request";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `invalid_request`, `invalid_organization_name` */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 422;
                        /** @enum {string} */
                        code: "invalid_request" | "invalid_organization_name";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `organization_rate_limited` */
            429: {
                headers: {
                    /** @description Seconds to wait before trying again. */
                    "Retry-After": string;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 429;
                        /** @enum {string} */
                        code: "organization_rate_limited";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `headers_too_large` */
            431: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 431;
                        /** @enum {string} */
                        code: "headers_too_large";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `service_unavailable` */
            503: {
                headers: {
                    /** @description Seconds to wait before trying again. */
                    "Retry-After": string;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 503;
                        /** @enum {string} */
                        code: "service_unavailable";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
        };
    };
    inviteToOrganization: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description The organization id (a uuid; anything else answers 403 like an organization you do not administer) */
                id: string;
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": {
                    /** @description The address the invitation goes to */
                    email: string;
                };
            };
        };
        responses: {
            /** @description Accepted: the invitation email is on its way */
            202: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["InvitationAccepted"];
                };
            };
            /** @description Refused: `malformed_json`, `malformed_encoding`, `malformed_path`, `bad_request` */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 400;
                        /** @enum {string} */
                        code: "malformed_json" | "malformed_encoding" | "malformed_path" | "bad_request";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `unauthenticated` */
            401: {
                headers: {
                    /** @description The bearer scheme is expected */
                    "WWW-Authenticate": "Bearer";
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 401;
                        /** @enum {string} */
                        code: "unauthenticated";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `not_organization_admin` */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 403;
                        /** @enum {string} */
                        code: "not_organization_admin";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `pending_invitation_limit` */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 409;
                        /** @enum {string} */
                        code: "pending_invitation_limit";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `payload_too_large` */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 413;
                        /** @enum {string} */
                        code: "payload_too_large";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `bad_request` */
            415: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 415;
                        /** @enum {string} */
                        code: "bad_request";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `invalid_request`, `invalid_email` */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 422;
                        /** @enum {string} */
                        code: "invalid_request" | "invalid_email";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `invitation_rate_limited`, `invitation_address_rate_limited`, `invitation_inviter_rate_limited`, `rate_limited` */
            429: {
                headers: {
                    /** @description Seconds to wait before trying again. */
                    "Retry-After": string;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 429;
                        /** @enum {string} */
                        code: "invitation_rate_limited" | "invitation_address_rate_limited" | "invitation_inviter_rate_limited" | "rate_limited";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `headers_too_large` */
            431: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 431;
                        /** @enum {string} */
                        code: "headers_too_large";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `service_unavailable` */
            503: {
                headers: {
                    /** @description Seconds to wait before trying again. */
                    "Retry-After": string;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 503;
                        /** @enum {string} */
                        code: "service_unavailable";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
        };
    };
    revokeInvitation: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description The organization id (a uuid; anything else answers 403 like an organization you do not administer) */
                id: string;
                /** @description The invitation id (a uuid) */
                invitationId: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Revoked */
            204: {
                headers: {
                    [name: string]: unknown;
                };
                content?: never;
            };
            /** @description Refused: `malformed_json`, `malformed_encoding`, `malformed_path`, `bad_request` */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 400;
                        /** @enum {string} */
                        code: "malformed_json" | "malformed_encoding" | "malformed_path" | "bad_request";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `unauthenticated` */
            401: {
                headers: {
                    /** @description The bearer scheme is expected */
                    "WWW-Authenticate": "Bearer";
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 401;
                        /** @enum {string} */
                        code: "unauthenticated";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `not_organization_admin` */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 403;
                        /** @enum {string} */
                        code: "not_organization_admin";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `invitation_not_found` */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 404;
                        /** @enum {string} */
                        code: "invitation_not_found";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `invitation_accepted` */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 409;
                        /** @enum {string} */
                        code: "invitation_accepted";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `payload_too_large` */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 413;
                        /** @enum {string} */
                        code: "payload_too_large";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `bad_request` */
            415: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 415;
                        /** @enum {string} */
                        code: "bad_request";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `headers_too_large` */
            431: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 431;
                        /** @enum {string} */
                        code: "headers_too_large";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `service_unavailable` */
            503: {
                headers: {
                    /** @description Seconds to wait before trying again. */
                    "Retry-After": string;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 503;
                        /** @enum {string} */
                        code: "service_unavailable";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
        };
    };
    acceptInvitation: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": {
                    /** @description The token from the #token= part of the invitation link */
                    token: string;
                };
            };
        };
        responses: {
            /** @description Now a member */
            201: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["MembershipCreated"];
                };
            };
            /** @description Refused: `malformed_json`, `malformed_encoding`, `malformed_path`, `bad_request` */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 400;
                        /** @enum {string} */
                        code: "malformed_json" | "malformed_encoding" | "malformed_path" | "bad_request";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `unauthenticated` */
            401: {
                headers: {
                    /** @description The bearer scheme is expected */
                    "WWW-Authenticate": "Bearer";
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 401;
                        /** @enum {string} */
                        code: "unauthenticated";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `payload_too_large` */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 413;
                        /** @enum {string} */
                        code: "payload_too_large";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `bad_request` */
            415: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 415;
                        /** @enum {string} */
                        code: "bad_request";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `invalid_request`, `invalid_invitation` */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 422;
                        /** @enum {string} */
                        code: "invalid_request" | "invalid_invitation";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `headers_too_large` */
            431: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 431;
                        /** @enum {string} */
                        code: "headers_too_large";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `service_unavailable` */
            503: {
                headers: {
                    /** @description Seconds to wait before trying again. */
                    "Retry-After": string;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 503;
                        /** @enum {string} */
                        code: "service_unavailable";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
        };
    };
    getOutboxBacklog: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The backlog */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Backlog"];
                };
            };
            /** @description Refused: `malformed_json`, `malformed_encoding`, `malformed_path`, `bad_request` */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 400;
                        /** @enum {string} */
                        code: "malformed_json" | "malformed_encoding" | "malformed_path" | "bad_request";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `unauthenticated` */
            401: {
                headers: {
                    /** @description The bearer scheme is expected */
                    "WWW-Authenticate": "Bearer";
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 401;
                        /** @enum {string} */
                        code: "unauthenticated";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `not_staff` */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 403;
                        /** @enum {string} */
                        code: "not_staff";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `payload_too_large` */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 413;
                        /** @enum {string} */
                        code: "payload_too_large";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `bad_request` */
            415: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 415;
                        /** @enum {string} */
                        code: "bad_request";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `headers_too_large` */
            431: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 431;
                        /** @enum {string} */
                        code: "headers_too_large";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `service_unavailable` */
            503: {
                headers: {
                    /** @description Seconds to wait before trying again. */
                    "Retry-After": string;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 503;
                        /** @enum {string} */
                        code: "service_unavailable";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
        };
    };
    listDeadLetters: {
        parameters: {
            query?: {
                /** @description Items per page */
                limit?: number;
                /** @description An `endCursor`: the page of older dead letters after it */
                after?: string;
                /** @description A `startCursor`: the page of newer dead letters before it */
                before?: string;
            };
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description One page */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["DeadLetterPage"];
                };
            };
            /** @description Refused: `malformed_json`, `malformed_encoding`, `malformed_path`, `bad_request`, `invalid_cursor` */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 400;
                        /** @enum {string} */
                        code: "malformed_json" | "malformed_encoding" | "malformed_path" | "bad_request" | "invalid_cursor";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `unauthenticated` */
            401: {
                headers: {
                    /** @description The bearer scheme is expected */
                    "WWW-Authenticate": "Bearer";
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 401;
                        /** @enum {string} */
                        code: "unauthenticated";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `not_staff` */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 403;
                        /** @enum {string} */
                        code: "not_staff";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `payload_too_large` */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 413;
                        /** @enum {string} */
                        code: "payload_too_large";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `bad_request` */
            415: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 415;
                        /** @enum {string} */
                        code: "bad_request";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `invalid_request` */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 422;
                        /** @enum {string} */
                        code: "invalid_request";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `headers_too_large` */
            431: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 431;
                        /** @enum {string} */
                        code: "headers_too_large";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `service_unavailable` */
            503: {
                headers: {
                    /** @description Seconds to wait before trying again. */
                    "Retry-After": string;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 503;
                        /** @enum {string} */
                        code: "service_unavailable";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
        };
    };
    getOutboxMessage: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description The message id (a uuid) */
                messageId: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The history */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["MessageHistory"];
                };
            };
            /** @description Refused: `malformed_json`, `malformed_encoding`, `malformed_path`, `bad_request` */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 400;
                        /** @enum {string} */
                        code: "malformed_json" | "malformed_encoding" | "malformed_path" | "bad_request";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `unauthenticated` */
            401: {
                headers: {
                    /** @description The bearer scheme is expected */
                    "WWW-Authenticate": "Bearer";
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 401;
                        /** @enum {string} */
                        code: "unauthenticated";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `not_staff` */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 403;
                        /** @enum {string} */
                        code: "not_staff";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `message_not_found` */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 404;
                        /** @enum {string} */
                        code: "message_not_found";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `payload_too_large` */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 413;
                        /** @enum {string} */
                        code: "payload_too_large";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `bad_request` */
            415: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 415;
                        /** @enum {string} */
                        code: "bad_request";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `headers_too_large` */
            431: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 431;
                        /** @enum {string} */
                        code: "headers_too_large";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `service_unavailable` */
            503: {
                headers: {
                    /** @description Seconds to wait before trying again. */
                    "Retry-After": string;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 503;
                        /** @enum {string} */
                        code: "service_unavailable";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
        };
    };
    reissueDeadLetter: {
        parameters: {
            query?: never;
            header: {
                /** @description The elevation token from POST /step-ups/confirmation (valid 5 minutes, bound to the session). */
                "X-Elevation-Token": string;
                /** @description Any 1–200 printable characters chosen by the caller; a repeat of the same key answers the first result without doing the work again. */
                "Idempotency-Key": string;
            };
            path: {
                /** @description The message id (a uuid) */
                messageId: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Reissued (or the replay of an earlier reissue with this key) */
            201: {
                headers: {
                    "Idempotent-Replayed"?: "true";
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Reissued"];
                };
            };
            /** @description Refused: `malformed_json`, `malformed_encoding`, `malformed_path`, `bad_request`, `idempotency_key_required` */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 400;
                        /** @enum {string} */
                        code: "malformed_json" | "malformed_encoding" | "malformed_path" | "bad_request" | "idempotency_key_required";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `unauthenticated` */
            401: {
                headers: {
                    /** @description The bearer scheme is expected */
                    "WWW-Authenticate": "Bearer";
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 401;
                        /** @enum {string} */
                        code: "unauthenticated";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `not_staff`, `elevation_required` */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 403;
                        /** @enum {string} */
                        code: "not_staff" | "elevation_required";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `dead_letter_not_found` */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 404;
                        /** @enum {string} */
                        code: "dead_letter_not_found";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `idempotency_key_in_use`, `invitation_message`, `security_notice_message`, `reissue_refused_provider_rejected`, `reissue_refused_decryption_failed`, `reissue_destination_mismatch`, `superseded_by_resend`, `challenge_expired`, `challenge_consumed`, `own_message`, `challenge_revoked`, `challenge_out_of_attempts`, `newer_message_exists`, `destination_suppressed` */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 409;
                        /** @enum {string} */
                        code: "idempotency_key_in_use" | "invitation_message" | "security_notice_message" | "reissue_refused_provider_rejected" | "reissue_refused_decryption_failed" | "reissue_destination_mismatch" | "superseded_by_resend" | "challenge_expired" | "challenge_consumed" | "own_message" | "challenge_revoked" | "challenge_out_of_attempts" | "newer_message_exists" | "destination_suppressed";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `payload_too_large` */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 413;
                        /** @enum {string} */
                        code: "payload_too_large";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `bad_request` */
            415: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 415;
                        /** @enum {string} */
                        code: "bad_request";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `idempotency_key_reused` */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 422;
                        /** @enum {string} */
                        code: "idempotency_key_reused";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `headers_too_large` */
            431: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 431;
                        /** @enum {string} */
                        code: "headers_too_large";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `service_unavailable` */
            503: {
                headers: {
                    /** @description Seconds to wait before trying again. */
                    "Retry-After": string;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 503;
                        /** @enum {string} */
                        code: "service_unavailable";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
        };
    };
    searchMessagesByDestination: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": {
                    /** @description The exact email address or E.164 phone number; hashed with the key the suppression list uses, never stored */
                    destination: string;
                    /** @default 20 */
                    limit?: number;
                    /**
                     * Format: uuid
                     * @description An `endCursor`: the page of older messages after it
                     */
                    before?: string;
                };
            };
        };
        responses: {
            /** @description One page */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["MessageSearchPage"];
                };
            };
            /** @description Refused: `malformed_json`, `malformed_encoding`, `malformed_path`, `bad_request`, `invalid_destination` */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 400;
                        /** @enum {string} */
                        code: "malformed_json" | "malformed_encoding" | "malformed_path" | "bad_request" | "invalid_destination";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `unauthenticated` */
            401: {
                headers: {
                    /** @description The bearer scheme is expected */
                    "WWW-Authenticate": "Bearer";
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 401;
                        /** @enum {string} */
                        code: "unauthenticated";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `not_staff` */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 403;
                        /** @enum {string} */
                        code: "not_staff";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `payload_too_large` */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 413;
                        /** @enum {string} */
                        code: "payload_too_large";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `bad_request` */
            415: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 415;
                        /** @enum {string} */
                        code: "bad_request";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `invalid_request` */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 422;
                        /** @enum {string} */
                        code: "invalid_request";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `headers_too_large` */
            431: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 431;
                        /** @enum {string} */
                        code: "headers_too_large";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `service_unavailable` */
            503: {
                headers: {
                    /** @description Seconds to wait before trying again. */
                    "Retry-After": string;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 503;
                        /** @enum {string} */
                        code: "service_unavailable";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
        };
    };
    countDeliveryEvents: {
        parameters: {
            query?: {
                /** @description The window: the last this many hours */
                hours?: number;
            };
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The counts */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["DeliveryCounts"];
                };
            };
            /** @description Refused: `malformed_json`, `malformed_encoding`, `malformed_path`, `bad_request` */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 400;
                        /** @enum {string} */
                        code: "malformed_json" | "malformed_encoding" | "malformed_path" | "bad_request";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `unauthenticated` */
            401: {
                headers: {
                    /** @description The bearer scheme is expected */
                    "WWW-Authenticate": "Bearer";
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 401;
                        /** @enum {string} */
                        code: "unauthenticated";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `not_staff` */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 403;
                        /** @enum {string} */
                        code: "not_staff";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `payload_too_large` */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 413;
                        /** @enum {string} */
                        code: "payload_too_large";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `bad_request` */
            415: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 415;
                        /** @enum {string} */
                        code: "bad_request";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `invalid_request` */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 422;
                        /** @enum {string} */
                        code: "invalid_request";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `headers_too_large` */
            431: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 431;
                        /** @enum {string} */
                        code: "headers_too_large";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `service_unavailable` */
            503: {
                headers: {
                    /** @description Seconds to wait before trying again. */
                    "Retry-After": string;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 503;
                        /** @enum {string} */
                        code: "service_unavailable";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
        };
    };
    redriveDeadLetters: {
        parameters: {
            query?: never;
            header: {
                /** @description The elevation token from POST /step-ups/confirmation (valid 5 minutes, bound to the session). */
                "X-Elevation-Token": string;
                /** @description Any 1–200 printable characters chosen by the caller; a repeat of the same key answers the first result without doing the work again. */
                "Idempotency-Key": string;
            };
            path?: never;
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": {
                    /** @enum {string} */
                    reason: "provider_rejected" | "retries_exhausted" | "challenge_expired" | "challenge_consumed" | "decryption_failed" | "superseded_by_resend" | "worker_crash_loop" | "invitation_revoked" | "invitation_accepted" | "invitation_expired" | "destination_suppressed";
                    /** @default 50 */
                    limit?: number;
                    /**
                     * Format: uuid
                     * @description The `endCursor` of the previous redrive: go on after it
                     */
                    after?: string;
                };
            };
        };
        responses: {
            /** @description What the redrive did (or the replay of an earlier one with this key) */
            200: {
                headers: {
                    "Idempotent-Replayed"?: "true";
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Redriven"];
                };
            };
            /** @description Refused: `malformed_json`, `malformed_encoding`, `malformed_path`, `bad_request`, `idempotency_key_required` */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 400;
                        /** @enum {string} */
                        code: "malformed_json" | "malformed_encoding" | "malformed_path" | "bad_request" | "idempotency_key_required";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `unauthenticated` */
            401: {
                headers: {
                    /** @description The bearer scheme is expected */
                    "WWW-Authenticate": "Bearer";
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 401;
                        /** @enum {string} */
                        code: "unauthenticated";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `not_staff`, `elevation_required` */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 403;
                        /** @enum {string} */
                        code: "not_staff" | "elevation_required";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `idempotency_key_in_use` */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 409;
                        /** @enum {string} */
                        code: "idempotency_key_in_use";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `payload_too_large` */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 413;
                        /** @enum {string} */
                        code: "payload_too_large";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `bad_request` */
            415: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 415;
                        /** @enum {string} */
                        code: "bad_request";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `invalid_request`, `idempotency_key_reused` */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 422;
                        /** @enum {string} */
                        code: "invalid_request" | "idempotency_key_reused";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `headers_too_large` */
            431: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 431;
                        /** @enum {string} */
                        code: "headers_too_large";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `service_unavailable` */
            503: {
                headers: {
                    /** @description Seconds to wait before trying again. */
                    "Retry-After": string;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 503;
                        /** @enum {string} */
                        code: "service_unavailable";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
        };
    };
    listChannelPauses: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The running pauses */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ChannelPauses"];
                };
            };
            /** @description Refused: `malformed_json`, `malformed_encoding`, `malformed_path`, `bad_request` */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 400;
                        /** @enum {string} */
                        code: "malformed_json" | "malformed_encoding" | "malformed_path" | "bad_request";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `unauthenticated` */
            401: {
                headers: {
                    /** @description The bearer scheme is expected */
                    "WWW-Authenticate": "Bearer";
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 401;
                        /** @enum {string} */
                        code: "unauthenticated";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `not_staff` */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 403;
                        /** @enum {string} */
                        code: "not_staff";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `payload_too_large` */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 413;
                        /** @enum {string} */
                        code: "payload_too_large";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `bad_request` */
            415: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 415;
                        /** @enum {string} */
                        code: "bad_request";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `headers_too_large` */
            431: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 431;
                        /** @enum {string} */
                        code: "headers_too_large";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `service_unavailable` */
            503: {
                headers: {
                    /** @description Seconds to wait before trying again. */
                    "Retry-After": string;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 503;
                        /** @enum {string} */
                        code: "service_unavailable";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
        };
    };
    liftChannelPause: {
        parameters: {
            query?: never;
            header: {
                /** @description The elevation token from POST /step-ups/confirmation (valid 5 minutes, bound to the session). */
                "X-Elevation-Token": string;
            };
            path: {
                channel: "email" | "whatsapp" | "sms";
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Lifted */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Released"];
                };
            };
            /** @description Refused: `malformed_json`, `malformed_encoding`, `malformed_path`, `bad_request` */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 400;
                        /** @enum {string} */
                        code: "malformed_json" | "malformed_encoding" | "malformed_path" | "bad_request";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `unauthenticated` */
            401: {
                headers: {
                    /** @description The bearer scheme is expected */
                    "WWW-Authenticate": "Bearer";
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 401;
                        /** @enum {string} */
                        code: "unauthenticated";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `not_staff`, `elevation_required` */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 403;
                        /** @enum {string} */
                        code: "not_staff" | "elevation_required";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `pause_not_found` */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 404;
                        /** @enum {string} */
                        code: "pause_not_found";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `payload_too_large` */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 413;
                        /** @enum {string} */
                        code: "payload_too_large";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `bad_request` */
            415: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 415;
                        /** @enum {string} */
                        code: "bad_request";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `headers_too_large` */
            431: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 431;
                        /** @enum {string} */
                        code: "headers_too_large";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `service_unavailable` */
            503: {
                headers: {
                    /** @description Seconds to wait before trying again. */
                    "Retry-After": string;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 503;
                        /** @enum {string} */
                        code: "service_unavailable";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
        };
    };
    liftProviderHold: {
        parameters: {
            query?: never;
            header: {
                /** @description The elevation token from POST /step-ups/confirmation (valid 5 minutes, bound to the session). */
                "X-Elevation-Token": string;
            };
            path: {
                provider: "ses" | "smtp" | "wasender" | "twilio" | "whatsapp_cloud";
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Lifted */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Released"];
                };
            };
            /** @description Refused: `malformed_json`, `malformed_encoding`, `malformed_path`, `bad_request` */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 400;
                        /** @enum {string} */
                        code: "malformed_json" | "malformed_encoding" | "malformed_path" | "bad_request";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `unauthenticated` */
            401: {
                headers: {
                    /** @description The bearer scheme is expected */
                    "WWW-Authenticate": "Bearer";
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 401;
                        /** @enum {string} */
                        code: "unauthenticated";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `not_staff`, `elevation_required` */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 403;
                        /** @enum {string} */
                        code: "not_staff" | "elevation_required";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `hold_not_found` */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 404;
                        /** @enum {string} */
                        code: "hold_not_found";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `payload_too_large` */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 413;
                        /** @enum {string} */
                        code: "payload_too_large";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `bad_request` */
            415: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 415;
                        /** @enum {string} */
                        code: "bad_request";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `headers_too_large` */
            431: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 431;
                        /** @enum {string} */
                        code: "headers_too_large";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `service_unavailable` */
            503: {
                headers: {
                    /** @description Seconds to wait before trying again. */
                    "Retry-After": string;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 503;
                        /** @enum {string} */
                        code: "service_unavailable";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
        };
    };
    getSendCaps: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The report */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        /**
                         * Format: date-time
                         * @description The clock hour the counters count
                         */
                        windowStart: string;
                        scopes: {
                            channel: string;
                            /** @enum {string} */
                            kind: "prefix" | "country" | "channel";
                            /** @description '' for the channel, a calling code, or a prefix's first four digits (the fullest of them) */
                            scope: string;
                            /**
                             * @description Who asked: `owner` (what only the owner of the account asks for: a recovery to its verified identifier, step-up, notices; counted, never held), `stranger` (what a pump can aim anywhere), `courier` (an API key or hook)
                             * @enum {string}
                             */
                            asked: "owner" | "stranger" | "courier";
                            sent: number;
                            /** @description The hourly cap of this class (null: counted by a previous release) */
                            cap: number | null;
                        }[];
                        /** Format: date-time */
                        conversionSince: string;
                        conversion: {
                            channel: string;
                            /** @description The first four digits of the numbers (`4477•••`); null for the whole channel */
                            prefix: string | null;
                            /** @description Codes published since conversionSince */
                            sent: number;
                            /** @description Of them, the ones a person typed in */
                            confirmed: number;
                            ratio: number | null;
                        }[];
                    };
                };
            };
            /** @description Refused: `malformed_json`, `malformed_encoding`, `malformed_path`, `bad_request` */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 400;
                        /** @enum {string} */
                        code: "malformed_json" | "malformed_encoding" | "malformed_path" | "bad_request";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `unauthenticated` */
            401: {
                headers: {
                    /** @description The bearer scheme is expected */
                    "WWW-Authenticate": "Bearer";
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 401;
                        /** @enum {string} */
                        code: "unauthenticated";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `not_staff` */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 403;
                        /** @enum {string} */
                        code: "not_staff";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `payload_too_large` */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 413;
                        /** @enum {string} */
                        code: "payload_too_large";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `bad_request` */
            415: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 415;
                        /** @enum {string} */
                        code: "bad_request";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `headers_too_large` */
            431: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 431;
                        /** @enum {string} */
                        code: "headers_too_large";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `service_unavailable` */
            503: {
                headers: {
                    /** @description Seconds to wait before trying again. */
                    "Retry-After": string;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 503;
                        /** @enum {string} */
                        code: "service_unavailable";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
        };
    };
    listSuppressions: {
        parameters: {
            query?: {
                limit?: number;
                after?: string;
            };
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description One page */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        items: {
                            /** Format: uuid */
                            id: string;
                            /** @enum {string} */
                            channel: "email" | "whatsapp" | "sms";
                            maskedDestination: string;
                            /** @enum {string} */
                            reason: "permanent_bounce" | "complaint";
                            /** Format: date-time */
                            since: string;
                            messageId: string | null;
                        }[];
                        pageInfo: {
                            hasNextPage: boolean;
                            endCursor: string | null;
                        };
                    };
                };
            };
            /** @description Refused: `malformed_json`, `malformed_encoding`, `malformed_path`, `bad_request`, `invalid_cursor` */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 400;
                        /** @enum {string} */
                        code: "malformed_json" | "malformed_encoding" | "malformed_path" | "bad_request" | "invalid_cursor";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `unauthenticated` */
            401: {
                headers: {
                    /** @description The bearer scheme is expected */
                    "WWW-Authenticate": "Bearer";
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 401;
                        /** @enum {string} */
                        code: "unauthenticated";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `not_staff` */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 403;
                        /** @enum {string} */
                        code: "not_staff";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `payload_too_large` */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 413;
                        /** @enum {string} */
                        code: "payload_too_large";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `bad_request` */
            415: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 415;
                        /** @enum {string} */
                        code: "bad_request";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `invalid_request` */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 422;
                        /** @enum {string} */
                        code: "invalid_request";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `headers_too_large` */
            431: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 431;
                        /** @enum {string} */
                        code: "headers_too_large";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `service_unavailable` */
            503: {
                headers: {
                    /** @description Seconds to wait before trying again. */
                    "Retry-After": string;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 503;
                        /** @enum {string} */
                        code: "service_unavailable";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
        };
    };
    liftSuppression: {
        parameters: {
            query?: never;
            header: {
                /** @description The elevation token from POST /step-ups/confirmation (valid 5 minutes, bound to the session). */
                "X-Elevation-Token": string;
            };
            path: {
                /** @description The suppression id (a uuid) */
                id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Lifted */
            204: {
                headers: {
                    [name: string]: unknown;
                };
                content?: never;
            };
            /** @description Refused: `malformed_json`, `malformed_encoding`, `malformed_path`, `bad_request` */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 400;
                        /** @enum {string} */
                        code: "malformed_json" | "malformed_encoding" | "malformed_path" | "bad_request";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `unauthenticated` */
            401: {
                headers: {
                    /** @description The bearer scheme is expected */
                    "WWW-Authenticate": "Bearer";
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 401;
                        /** @enum {string} */
                        code: "unauthenticated";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `not_staff`, `elevation_required` */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 403;
                        /** @enum {string} */
                        code: "not_staff" | "elevation_required";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `suppression_not_found` */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 404;
                        /** @enum {string} */
                        code: "suppression_not_found";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `payload_too_large` */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 413;
                        /** @enum {string} */
                        code: "payload_too_large";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `bad_request` */
            415: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 415;
                        /** @enum {string} */
                        code: "bad_request";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `headers_too_large` */
            431: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 431;
                        /** @enum {string} */
                        code: "headers_too_large";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `service_unavailable` */
            503: {
                headers: {
                    /** @description Seconds to wait before trying again. */
                    "Retry-After": string;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 503;
                        /** @enum {string} */
                        code: "service_unavailable";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
        };
    };
    listAuditRecords: {
        parameters: {
            query?: {
                /** @description Items per page */
                limit?: number;
                /** @description An `endCursor`: the page of older records after it */
                after?: string;
                /** @description Only this action */
                action?: string;
                /** @description Only records by this actor (a staff identity id, `cli:<login>` or `migration:<name>`) */
                actor?: string;
                /** @description Only records about this subject (an identity, message or suppression id) */
                subject?: string;
                /** @description Only records at or after this instant */
                from?: string;
                /** @description Only records before this instant */
                to?: string;
            };
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description One page */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["AuditRecordPage"];
                };
            };
            /** @description Refused: `malformed_json`, `malformed_encoding`, `malformed_path`, `bad_request`, `invalid_cursor` */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 400;
                        /** @enum {string} */
                        code: "malformed_json" | "malformed_encoding" | "malformed_path" | "bad_request" | "invalid_cursor";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `unauthenticated` */
            401: {
                headers: {
                    /** @description The bearer scheme is expected */
                    "WWW-Authenticate": "Bearer";
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 401;
                        /** @enum {string} */
                        code: "unauthenticated";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `not_staff` */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 403;
                        /** @enum {string} */
                        code: "not_staff";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `payload_too_large` */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 413;
                        /** @enum {string} */
                        code: "payload_too_large";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `bad_request` */
            415: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 415;
                        /** @enum {string} */
                        code: "bad_request";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `invalid_request` */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 422;
                        /** @enum {string} */
                        code: "invalid_request";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `headers_too_large` */
            431: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 431;
                        /** @enum {string} */
                        code: "headers_too_large";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `service_unavailable` */
            503: {
                headers: {
                    /** @description Seconds to wait before trying again. */
                    "Retry-After": string;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 503;
                        /** @enum {string} */
                        code: "service_unavailable";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
        };
    };
    exportPerson: {
        parameters: {
            query?: never;
            header: {
                /** @description The elevation token from POST /step-ups/confirmation (valid 5 minutes, bound to the session). */
                "X-Elevation-Token": string;
            };
            path?: never;
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["PersonRequest"];
            };
        };
        responses: {
            /** @description The export */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["PersonExport"];
                };
            };
            /** @description Refused: `malformed_json`, `malformed_encoding`, `malformed_path`, `bad_request` */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 400;
                        /** @enum {string} */
                        code: "malformed_json" | "malformed_encoding" | "malformed_path" | "bad_request";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `unauthenticated` */
            401: {
                headers: {
                    /** @description The bearer scheme is expected */
                    "WWW-Authenticate": "Bearer";
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 401;
                        /** @enum {string} */
                        code: "unauthenticated";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `not_staff`, `elevation_required` */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 403;
                        /** @enum {string} */
                        code: "not_staff" | "elevation_required";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `person_not_found` */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 404;
                        /** @enum {string} */
                        code: "person_not_found";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `payload_too_large` */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 413;
                        /** @enum {string} */
                        code: "payload_too_large";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `bad_request` */
            415: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 415;
                        /** @enum {string} */
                        code: "bad_request";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `invalid_request`, `invalid_identifier` */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 422;
                        /** @enum {string} */
                        code: "invalid_request" | "invalid_identifier";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `headers_too_large` */
            431: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 431;
                        /** @enum {string} */
                        code: "headers_too_large";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `service_unavailable` */
            503: {
                headers: {
                    /** @description Seconds to wait before trying again. */
                    "Retry-After": string;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 503;
                        /** @enum {string} */
                        code: "service_unavailable";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
        };
    };
    erasePerson: {
        parameters: {
            query?: never;
            header: {
                /** @description The elevation token from POST /step-ups/confirmation (valid 5 minutes, bound to the session). */
                "X-Elevation-Token": string;
            };
            path?: never;
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["PersonRequest"];
            };
        };
        responses: {
            /** @description Erased */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["PersonErased"];
                };
            };
            /** @description Refused: `malformed_json`, `malformed_encoding`, `malformed_path`, `bad_request` */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 400;
                        /** @enum {string} */
                        code: "malformed_json" | "malformed_encoding" | "malformed_path" | "bad_request";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `unauthenticated` */
            401: {
                headers: {
                    /** @description The bearer scheme is expected */
                    "WWW-Authenticate": "Bearer";
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 401;
                        /** @enum {string} */
                        code: "unauthenticated";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `not_staff`, `elevation_required` */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 403;
                        /** @enum {string} */
                        code: "not_staff" | "elevation_required";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `person_not_found` */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 404;
                        /** @enum {string} */
                        code: "person_not_found";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `own_identity`, `staff_member`, `sole_admin` */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 409;
                        /** @enum {string} */
                        code: "own_identity" | "staff_member" | "sole_admin";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `payload_too_large` */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 413;
                        /** @enum {string} */
                        code: "payload_too_large";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `bad_request` */
            415: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 415;
                        /** @enum {string} */
                        code: "bad_request";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `invalid_request`, `invalid_identifier` */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 422;
                        /** @enum {string} */
                        code: "invalid_request" | "invalid_identifier";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `headers_too_large` */
            431: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 431;
                        /** @enum {string} */
                        code: "headers_too_large";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `service_unavailable` */
            503: {
                headers: {
                    /** @description Seconds to wait before trying again. */
                    "Retry-After": string;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 503;
                        /** @enum {string} */
                        code: "service_unavailable";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
        };
    };
    sendCourierMessage: {
        parameters: {
            query?: never;
            header: {
                /** @description Any 1–200 printable characters chosen by the caller; a repeat of the same key answers the first result without doing the work again. */
                "Idempotency-Key": string;
            };
            path?: never;
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": {
                    /**
                     * @description What the message is for; `magic_link` carries a link, every other purpose a code
                     * @enum {string}
                     */
                    purpose: "sign_up" | "add_sign_in_method" | "password_recovery" | "step_up" | "verification_code" | "magic_link";
                    /** @enum {string} */
                    channel: "email" | "whatsapp" | "sms";
                    /** @description An email address, or an E.164 number for a phone channel */
                    destination: string;
                    /** @description Sealed the moment it arrives; never stored, logged or returned in the clear */
                    secret: {
                        /** @description 4–32 letters, digits or hyphens */
                        code: string;
                    } | {
                        /** @description An absolute https URL carrying your token */
                        link: string;
                    };
                    /**
                     * Format: date-time
                     * @description When the secret stops working: in the future, at most 24 h away; never sent after it
                     */
                    expiresAt: string;
                    /** @description A shipped locale (en, de, es); otherwise the deployment default */
                    locale?: string;
                    /** @description Non-secret display values (verification_code and magic_link only) */
                    data?: {
                        /** @description Your product name, shown instead of PRODUCT_NAME (no link, address or line break) */
                        appName?: string;
                    };
                };
            };
        };
        responses: {
            /** @description Accepted (or the replay of an earlier request with this key) */
            202: {
                headers: {
                    "Idempotent-Replayed"?: "true";
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        /** Format: uuid */
                        messageId: string;
                    };
                };
            };
            /** @description Refused: `malformed_json`, `malformed_encoding`, `malformed_path`, `bad_request`, `idempotency_key_required` */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 400;
                        /** @enum {string} */
                        code: "malformed_json" | "malformed_encoding" | "malformed_path" | "bad_request" | "idempotency_key_required";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `unauthenticated` */
            401: {
                headers: {
                    /** @description The bearer scheme is expected */
                    "WWW-Authenticate": "Bearer";
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 401;
                        /** @enum {string} */
                        code: "unauthenticated";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `api_key_scope` */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 403;
                        /** @enum {string} */
                        code: "api_key_scope";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `idempotency_key_in_use` */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 409;
                        /** @enum {string} */
                        code: "idempotency_key_in_use";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `payload_too_large` */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 413;
                        /** @enum {string} */
                        code: "payload_too_large";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `bad_request` */
            415: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 415;
                        /** @enum {string} */
                        code: "bad_request";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `invalid_request`, `idempotency_key_reused`, `invalid_destination`, `unsupported_phone_number`, `invalid_secret`, `invalid_link`, `link_origin_not_allowed`, `invalid_expiry`, `invalid_data`, `channel_unavailable` */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 422;
                        /** @enum {string} */
                        code: "invalid_request" | "idempotency_key_reused" | "invalid_destination" | "unsupported_phone_number" | "invalid_secret" | "invalid_link" | "link_origin_not_allowed" | "invalid_expiry" | "invalid_data" | "channel_unavailable";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `rate_limited`, `destination_budget_exhausted`, `api_key_budget_exhausted`, `too_many_requests` */
            429: {
                headers: {
                    /** @description Seconds to wait before trying again. */
                    "Retry-After": string;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 429;
                        /** @enum {string} */
                        code: "rate_limited" | "destination_budget_exhausted" | "api_key_budget_exhausted" | "too_many_requests";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `headers_too_large` */
            431: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 431;
                        /** @enum {string} */
                        code: "headers_too_large";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `service_unavailable`, `upgrade_in_progress` */
            503: {
                headers: {
                    /** @description Seconds to wait before trying again. */
                    "Retry-After": string;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 503;
                        /** @enum {string} */
                        code: "service_unavailable" | "upgrade_in_progress";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
        };
    };
    getCourierMessage: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description The id `POST /v1/messages` answered */
                messageId: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The message */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        /** Format: uuid */
                        messageId: string;
                        purpose: string;
                        /** @enum {string} */
                        channel: "email" | "whatsapp" | "sms";
                        /** @example a•••e@e•••.com */
                        maskedDestination: string;
                        /** @enum {string} */
                        state: "pending" | "leased" | "published" | "dead_lettered";
                        attemptCount: number;
                        /** Format: date-time */
                        createdAt: string;
                        /** Format: date-time */
                        expiresAt: string;
                        publishedAt: string | null;
                        deadLetteredAt: string | null;
                        deadLetterReason: ("provider_rejected" | "retries_exhausted" | "challenge_expired" | "challenge_consumed" | "decryption_failed" | "superseded_by_resend" | "worker_crash_loop" | "invitation_revoked" | "invitation_accepted" | "invitation_expired" | "destination_suppressed") | null;
                        attempts: {
                            attemptNo: number;
                            /** @enum {string} */
                            outcome: "published" | "retryable_error" | "failed";
                            failureClass: ("REJECTED" | "THROTTLED" | "UNAVAILABLE" | "INDETERMINATE" | "unexpected_worker_error" | "invitation_link_unconfigured") | null;
                            /** Format: date-time */
                            attemptedAt: string;
                        }[];
                    };
                };
            };
            /** @description Refused: `malformed_json`, `malformed_encoding`, `malformed_path`, `bad_request` */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 400;
                        /** @enum {string} */
                        code: "malformed_json" | "malformed_encoding" | "malformed_path" | "bad_request";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `unauthenticated` */
            401: {
                headers: {
                    /** @description The bearer scheme is expected */
                    "WWW-Authenticate": "Bearer";
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 401;
                        /** @enum {string} */
                        code: "unauthenticated";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `message_not_found` */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 404;
                        /** @enum {string} */
                        code: "message_not_found";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `payload_too_large` */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 413;
                        /** @enum {string} */
                        code: "payload_too_large";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `bad_request` */
            415: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 415;
                        /** @enum {string} */
                        code: "bad_request";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `too_many_requests` */
            429: {
                headers: {
                    /** @description Seconds to wait before trying again. */
                    "Retry-After": string;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 429;
                        /** @enum {string} */
                        code: "too_many_requests";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `headers_too_large` */
            431: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 431;
                        /** @enum {string} */
                        code: "headers_too_large";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `service_unavailable` */
            503: {
                headers: {
                    /** @description Seconds to wait before trying again. */
                    "Retry-After": string;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 503;
                        /** @enum {string} */
                        code: "service_unavailable";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
        };
    };
    listApiKeys: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The keys */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        items: {
                            /** Format: uuid */
                            id: string;
                            name: string;
                            purposes: ("sign_up" | "add_sign_in_method" | "password_recovery" | "step_up" | "verification_code" | "magic_link")[];
                            channels: ("email" | "whatsapp" | "sms")[];
                            requestsPerMinute: number;
                            perDestinationPerHour: number;
                            perDestinationPerDay: number;
                            sendsPerHour: number;
                            destinationsPerHour: number;
                            linkOrigins: string[];
                            /** Format: uuid */
                            createdBy: string;
                            /** Format: date-time */
                            createdAt: string;
                            revokedAt: string | null;
                            lastUsedAt: string | null;
                            /** @description The key this one replaced by rotation */
                            replaces: string | null;
                        }[];
                    };
                };
            };
            /** @description Refused: `malformed_json`, `malformed_encoding`, `malformed_path`, `bad_request` */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 400;
                        /** @enum {string} */
                        code: "malformed_json" | "malformed_encoding" | "malformed_path" | "bad_request";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `unauthenticated` */
            401: {
                headers: {
                    /** @description The bearer scheme is expected */
                    "WWW-Authenticate": "Bearer";
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 401;
                        /** @enum {string} */
                        code: "unauthenticated";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `not_staff` */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 403;
                        /** @enum {string} */
                        code: "not_staff";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `payload_too_large` */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 413;
                        /** @enum {string} */
                        code: "payload_too_large";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `bad_request` */
            415: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 415;
                        /** @enum {string} */
                        code: "bad_request";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `headers_too_large` */
            431: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 431;
                        /** @enum {string} */
                        code: "headers_too_large";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `service_unavailable` */
            503: {
                headers: {
                    /** @description Seconds to wait before trying again. */
                    "Retry-After": string;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 503;
                        /** @enum {string} */
                        code: "service_unavailable";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
        };
    };
    createApiKey: {
        parameters: {
            query?: never;
            header: {
                /** @description The elevation token from POST /step-ups/confirmation (valid 5 minutes, bound to the session). */
                "X-Elevation-Token": string;
            };
            path?: never;
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": {
                    name: string;
                    purposes: ("sign_up" | "add_sign_in_method" | "password_recovery" | "step_up" | "verification_code" | "magic_link")[];
                    channels: ("email" | "whatsapp" | "sms")[];
                    /** @default 600 */
                    requestsPerMinute?: number;
                    /** @default 5 */
                    perDestinationPerHour?: number;
                    /** @default 20 */
                    perDestinationPerDay?: number;
                    /**
                     * @description Messages the key may send in a clock hour; past it 429 `api_key_budget_exhausted` until the hour ends
                     * @default 1000
                     */
                    sendsPerHour?: number;
                    /**
                     * @description Addresses the key may send to in a clock hour that it had not sent to within the hour (a leaked key cannot reach thousands)
                     * @default 100
                     */
                    destinationsPerHour?: number;
                    /**
                     * @description Where its magic links may point: required for a key scoped to `magic_link` (none = no magic link)
                     * @default []
                     */
                    linkOrigins?: string[];
                };
            };
        };
        responses: {
            /** @description Created */
            201: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        /** Format: uuid */
                        id: string;
                        /** @description The key itself (`sp_live_…`): shown in this answer only, stored as a hash */
                        key: string;
                    };
                };
            };
            /** @description Refused: `malformed_json`, `malformed_encoding`, `malformed_path`, `bad_request` */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 400;
                        /** @enum {string} */
                        code: "malformed_json" | "malformed_encoding" | "malformed_path" | "bad_request";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `unauthenticated` */
            401: {
                headers: {
                    /** @description The bearer scheme is expected */
                    "WWW-Authenticate": "Bearer";
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 401;
                        /** @enum {string} */
                        code: "unauthenticated";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `not_staff`, `elevation_required` */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 403;
                        /** @enum {string} */
                        code: "not_staff" | "elevation_required";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `payload_too_large` */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 413;
                        /** @enum {string} */
                        code: "payload_too_large";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `bad_request` */
            415: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 415;
                        /** @enum {string} */
                        code: "bad_request";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `invalid_request`, `link_origins_required` */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 422;
                        /** @enum {string} */
                        code: "invalid_request" | "link_origins_required";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `headers_too_large` */
            431: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 431;
                        /** @enum {string} */
                        code: "headers_too_large";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `service_unavailable` */
            503: {
                headers: {
                    /** @description Seconds to wait before trying again. */
                    "Retry-After": string;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 503;
                        /** @enum {string} */
                        code: "service_unavailable";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
        };
    };
    changeApiKey: {
        parameters: {
            query?: never;
            header: {
                /** @description The elevation token from POST /step-ups/confirmation (valid 5 minutes, bound to the session). */
                "X-Elevation-Token": string;
            };
            path: {
                /** @description The API key id (a uuid) */
                id: string;
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": {
                    /** @description Messages the key may send in a clock hour; past it 429 `api_key_budget_exhausted` until the hour ends */
                    sendsPerHour?: number;
                    /** @description Addresses the key may send to in a clock hour that it had not sent to within the hour (a leaked key cannot reach thousands) */
                    destinationsPerHour?: number;
                    /** @description Where its magic links may point: required for a key scoped to `magic_link` (none = no magic link) */
                    linkOrigins?: string[];
                };
            };
        };
        responses: {
            /** @description Changed */
            204: {
                headers: {
                    [name: string]: unknown;
                };
                content?: never;
            };
            /** @description Refused: `malformed_json`, `malformed_encoding`, `malformed_path`, `bad_request` */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 400;
                        /** @enum {string} */
                        code: "malformed_json" | "malformed_encoding" | "malformed_path" | "bad_request";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `unauthenticated` */
            401: {
                headers: {
                    /** @description The bearer scheme is expected */
                    "WWW-Authenticate": "Bearer";
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 401;
                        /** @enum {string} */
                        code: "unauthenticated";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `not_staff`, `elevation_required` */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 403;
                        /** @enum {string} */
                        code: "not_staff" | "elevation_required";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `api_key_not_found` */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 404;
                        /** @enum {string} */
                        code: "api_key_not_found";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `payload_too_large` */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 413;
                        /** @enum {string} */
                        code: "payload_too_large";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `bad_request` */
            415: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 415;
                        /** @enum {string} */
                        code: "bad_request";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `invalid_request`, `link_origins_required` */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 422;
                        /** @enum {string} */
                        code: "invalid_request" | "link_origins_required";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `headers_too_large` */
            431: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 431;
                        /** @enum {string} */
                        code: "headers_too_large";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `service_unavailable` */
            503: {
                headers: {
                    /** @description Seconds to wait before trying again. */
                    "Retry-After": string;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 503;
                        /** @enum {string} */
                        code: "service_unavailable";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
        };
    };
    rotateApiKey: {
        parameters: {
            query?: never;
            header: {
                /** @description The elevation token from POST /step-ups/confirmation (valid 5 minutes, bound to the session). */
                "X-Elevation-Token": string;
            };
            path: {
                /** @description The API key id (a uuid) */
                id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The new key */
            201: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        /** Format: uuid */
                        id: string;
                        /** @description The key itself (`sp_live_…`): shown in this answer only, stored as a hash */
                        key: string;
                    };
                };
            };
            /** @description Refused: `malformed_json`, `malformed_encoding`, `malformed_path`, `bad_request` */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 400;
                        /** @enum {string} */
                        code: "malformed_json" | "malformed_encoding" | "malformed_path" | "bad_request";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `unauthenticated` */
            401: {
                headers: {
                    /** @description The bearer scheme is expected */
                    "WWW-Authenticate": "Bearer";
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 401;
                        /** @enum {string} */
                        code: "unauthenticated";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `not_staff`, `elevation_required` */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 403;
                        /** @enum {string} */
                        code: "not_staff" | "elevation_required";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `api_key_not_found` */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 404;
                        /** @enum {string} */
                        code: "api_key_not_found";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `payload_too_large` */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 413;
                        /** @enum {string} */
                        code: "payload_too_large";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `bad_request` */
            415: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 415;
                        /** @enum {string} */
                        code: "bad_request";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `headers_too_large` */
            431: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 431;
                        /** @enum {string} */
                        code: "headers_too_large";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `service_unavailable` */
            503: {
                headers: {
                    /** @description Seconds to wait before trying again. */
                    "Retry-After": string;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 503;
                        /** @enum {string} */
                        code: "service_unavailable";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
        };
    };
    revokeApiKey: {
        parameters: {
            query?: never;
            header: {
                /** @description The elevation token from POST /step-ups/confirmation (valid 5 minutes, bound to the session). */
                "X-Elevation-Token": string;
            };
            path: {
                /** @description The API key id (a uuid) */
                id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Revoked */
            204: {
                headers: {
                    [name: string]: unknown;
                };
                content?: never;
            };
            /** @description Refused: `malformed_json`, `malformed_encoding`, `malformed_path`, `bad_request` */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 400;
                        /** @enum {string} */
                        code: "malformed_json" | "malformed_encoding" | "malformed_path" | "bad_request";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `unauthenticated` */
            401: {
                headers: {
                    /** @description The bearer scheme is expected */
                    "WWW-Authenticate": "Bearer";
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 401;
                        /** @enum {string} */
                        code: "unauthenticated";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `not_staff`, `elevation_required` */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 403;
                        /** @enum {string} */
                        code: "not_staff" | "elevation_required";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `api_key_not_found` */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 404;
                        /** @enum {string} */
                        code: "api_key_not_found";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `payload_too_large` */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 413;
                        /** @enum {string} */
                        code: "payload_too_large";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `bad_request` */
            415: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 415;
                        /** @enum {string} */
                        code: "bad_request";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `headers_too_large` */
            431: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 431;
                        /** @enum {string} */
                        code: "headers_too_large";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `service_unavailable` */
            503: {
                headers: {
                    /** @description Seconds to wait before trying again. */
                    "Retry-After": string;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 503;
                        /** @enum {string} */
                        code: "service_unavailable";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
        };
    };
    listWebhookEndpoints: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The endpoints */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["WebhookEndpointList"];
                };
            };
            /** @description Refused: `malformed_json`, `malformed_encoding`, `malformed_path`, `bad_request` */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 400;
                        /** @enum {string} */
                        code: "malformed_json" | "malformed_encoding" | "malformed_path" | "bad_request";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `unauthenticated` */
            401: {
                headers: {
                    /** @description The bearer scheme is expected */
                    "WWW-Authenticate": "Bearer";
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 401;
                        /** @enum {string} */
                        code: "unauthenticated";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `not_staff` */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 403;
                        /** @enum {string} */
                        code: "not_staff";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `payload_too_large` */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 413;
                        /** @enum {string} */
                        code: "payload_too_large";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `bad_request` */
            415: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 415;
                        /** @enum {string} */
                        code: "bad_request";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `headers_too_large` */
            431: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 431;
                        /** @enum {string} */
                        code: "headers_too_large";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `service_unavailable` */
            503: {
                headers: {
                    /** @description Seconds to wait before trying again. */
                    "Retry-After": string;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 503;
                        /** @enum {string} */
                        code: "service_unavailable";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
        };
    };
    createWebhookEndpoint: {
        parameters: {
            query?: never;
            header: {
                /** @description The elevation token from POST /step-ups/confirmation (valid 5 minutes, bound to the session). */
                "X-Elevation-Token": string;
            };
            path?: never;
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": {
                    /** @description https URL of the receiver (http only to an allow-listed host outside production) */
                    url: string;
                    /** @description The event types this endpoint hears */
                    events: ("message.accepted" | "message.published" | "message.delivered" | "message.bounced" | "message.complained" | "message.dead_lettered" | "destination.suppressed" | "identity.created" | "sign_in_method.added" | "sign_in_method.removed" | "password.changed" | "sessions.revoked" | "invitation.accepted")[];
                };
            };
        };
        responses: {
            /** @description Created */
            201: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["WebhookEndpointCreated"];
                };
            };
            /** @description Refused: `malformed_json`, `malformed_encoding`, `malformed_path`, `bad_request` */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 400;
                        /** @enum {string} */
                        code: "malformed_json" | "malformed_encoding" | "malformed_path" | "bad_request";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `unauthenticated` */
            401: {
                headers: {
                    /** @description The bearer scheme is expected */
                    "WWW-Authenticate": "Bearer";
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 401;
                        /** @enum {string} */
                        code: "unauthenticated";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `not_staff`, `elevation_required` */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 403;
                        /** @enum {string} */
                        code: "not_staff" | "elevation_required";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `payload_too_large` */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 413;
                        /** @enum {string} */
                        code: "payload_too_large";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `bad_request` */
            415: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 415;
                        /** @enum {string} */
                        code: "bad_request";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `invalid_request`, `webhook_url_invalid`, `webhook_url_not_https`, `webhook_url_forbidden_address`, `webhook_url_unresolvable` */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 422;
                        /** @enum {string} */
                        code: "invalid_request" | "webhook_url_invalid" | "webhook_url_not_https" | "webhook_url_forbidden_address" | "webhook_url_unresolvable";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `headers_too_large` */
            431: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 431;
                        /** @enum {string} */
                        code: "headers_too_large";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `service_unavailable` */
            503: {
                headers: {
                    /** @description Seconds to wait before trying again. */
                    "Retry-After": string;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 503;
                        /** @enum {string} */
                        code: "service_unavailable";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
        };
    };
    disableWebhookEndpoint: {
        parameters: {
            query?: never;
            header: {
                /** @description The elevation token from POST /step-ups/confirmation (valid 5 minutes, bound to the session). */
                "X-Elevation-Token": string;
            };
            path: {
                /** @description The endpoint id (a uuid) */
                id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Disabled */
            204: {
                headers: {
                    [name: string]: unknown;
                };
                content?: never;
            };
            /** @description Refused: `malformed_json`, `malformed_encoding`, `malformed_path`, `bad_request` */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 400;
                        /** @enum {string} */
                        code: "malformed_json" | "malformed_encoding" | "malformed_path" | "bad_request";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `unauthenticated` */
            401: {
                headers: {
                    /** @description The bearer scheme is expected */
                    "WWW-Authenticate": "Bearer";
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 401;
                        /** @enum {string} */
                        code: "unauthenticated";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `not_staff`, `elevation_required` */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 403;
                        /** @enum {string} */
                        code: "not_staff" | "elevation_required";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `webhook_endpoint_not_found` */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 404;
                        /** @enum {string} */
                        code: "webhook_endpoint_not_found";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `payload_too_large` */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 413;
                        /** @enum {string} */
                        code: "payload_too_large";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `bad_request` */
            415: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 415;
                        /** @enum {string} */
                        code: "bad_request";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `headers_too_large` */
            431: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 431;
                        /** @enum {string} */
                        code: "headers_too_large";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `service_unavailable` */
            503: {
                headers: {
                    /** @description Seconds to wait before trying again. */
                    "Retry-After": string;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 503;
                        /** @enum {string} */
                        code: "service_unavailable";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
        };
    };
    rotateWebhookSecret: {
        parameters: {
            query?: never;
            header: {
                /** @description The elevation token from POST /step-ups/confirmation (valid 5 minutes, bound to the session). */
                "X-Elevation-Token": string;
            };
            path: {
                /** @description The endpoint id (a uuid) */
                id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Rotated */
            201: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["WebhookSecretRotated"];
                };
            };
            /** @description Refused: `malformed_json`, `malformed_encoding`, `malformed_path`, `bad_request` */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 400;
                        /** @enum {string} */
                        code: "malformed_json" | "malformed_encoding" | "malformed_path" | "bad_request";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `unauthenticated` */
            401: {
                headers: {
                    /** @description The bearer scheme is expected */
                    "WWW-Authenticate": "Bearer";
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 401;
                        /** @enum {string} */
                        code: "unauthenticated";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `not_staff`, `elevation_required` */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 403;
                        /** @enum {string} */
                        code: "not_staff" | "elevation_required";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `webhook_endpoint_not_found` */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 404;
                        /** @enum {string} */
                        code: "webhook_endpoint_not_found";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `payload_too_large` */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 413;
                        /** @enum {string} */
                        code: "payload_too_large";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `bad_request` */
            415: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 415;
                        /** @enum {string} */
                        code: "bad_request";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `headers_too_large` */
            431: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 431;
                        /** @enum {string} */
                        code: "headers_too_large";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `service_unavailable` */
            503: {
                headers: {
                    /** @description Seconds to wait before trying again. */
                    "Retry-After": string;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 503;
                        /** @enum {string} */
                        code: "service_unavailable";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
        };
    };
    listWebhookDeliveries: {
        parameters: {
            query?: {
                /** @description How many of the newest deliveries */
                limit?: number;
            };
            header?: never;
            path: {
                /** @description The endpoint id (a uuid) */
                id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The deliveries */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["WebhookDeliveryList"];
                };
            };
            /** @description Refused: `malformed_json`, `malformed_encoding`, `malformed_path`, `bad_request` */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 400;
                        /** @enum {string} */
                        code: "malformed_json" | "malformed_encoding" | "malformed_path" | "bad_request";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `unauthenticated` */
            401: {
                headers: {
                    /** @description The bearer scheme is expected */
                    "WWW-Authenticate": "Bearer";
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 401;
                        /** @enum {string} */
                        code: "unauthenticated";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `not_staff` */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 403;
                        /** @enum {string} */
                        code: "not_staff";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `webhook_endpoint_not_found` */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 404;
                        /** @enum {string} */
                        code: "webhook_endpoint_not_found";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `payload_too_large` */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 413;
                        /** @enum {string} */
                        code: "payload_too_large";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `bad_request` */
            415: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 415;
                        /** @enum {string} */
                        code: "bad_request";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `invalid_request` */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 422;
                        /** @enum {string} */
                        code: "invalid_request";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `headers_too_large` */
            431: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 431;
                        /** @enum {string} */
                        code: "headers_too_large";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `service_unavailable` */
            503: {
                headers: {
                    /** @description Seconds to wait before trying again. */
                    "Retry-After": string;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 503;
                        /** @enum {string} */
                        code: "service_unavailable";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
        };
    };
    redriveWebhookDeliveries: {
        parameters: {
            query?: never;
            header: {
                /** @description The elevation token from POST /step-ups/confirmation (valid 5 minutes, bound to the session). */
                "X-Elevation-Token": string;
            };
            path: {
                /** @description The endpoint id (a uuid) */
                id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description How many went back to pending */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["WebhookRedriven"];
                };
            };
            /** @description Refused: `malformed_json`, `malformed_encoding`, `malformed_path`, `bad_request` */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 400;
                        /** @enum {string} */
                        code: "malformed_json" | "malformed_encoding" | "malformed_path" | "bad_request";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `unauthenticated` */
            401: {
                headers: {
                    /** @description The bearer scheme is expected */
                    "WWW-Authenticate": "Bearer";
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 401;
                        /** @enum {string} */
                        code: "unauthenticated";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `not_staff`, `elevation_required` */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 403;
                        /** @enum {string} */
                        code: "not_staff" | "elevation_required";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `webhook_endpoint_not_found` */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 404;
                        /** @enum {string} */
                        code: "webhook_endpoint_not_found";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `payload_too_large` */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 413;
                        /** @enum {string} */
                        code: "payload_too_large";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `bad_request` */
            415: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 415;
                        /** @enum {string} */
                        code: "bad_request";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `headers_too_large` */
            431: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 431;
                        /** @enum {string} */
                        code: "headers_too_large";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `service_unavailable` */
            503: {
                headers: {
                    /** @description Seconds to wait before trying again. */
                    "Retry-After": string;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 503;
                        /** @enum {string} */
                        code: "service_unavailable";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
        };
    };
    receiveSesEvent: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody: {
            content: {
                "text/plain": {
                    /** @enum {string} */
                    Type: "Notification" | "SubscriptionConfirmation" | "UnsubscribeConfirmation";
                    MessageId: string;
                    TopicArn: string;
                    Message: string;
                    Timestamp: string;
                    /** @enum {string} */
                    SignatureVersion: "1" | "2";
                    Signature: string;
                    SigningCertURL: string;
                    Subject?: string;
                    SubscribeURL?: string;
                    Token?: string;
                };
            };
        };
        responses: {
            /** @description Handled */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        /** @enum {string} */
                        outcome: "stored" | "duplicate" | "unknown_message" | "ignored" | "subscription_confirmed";
                    };
                };
            };
            /** @description Refused: `malformed_json`, `malformed_encoding`, `malformed_path`, `bad_request`, `malformed` */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 400;
                        /** @enum {string} */
                        code: "malformed_json" | "malformed_encoding" | "malformed_path" | "bad_request" | "malformed";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `invalid_signature`, `invalid_certificate_url`, `invalid_subscribe_url`, `unknown_topic`, `stale_message` */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 403;
                        /** @enum {string} */
                        code: "invalid_signature" | "invalid_certificate_url" | "invalid_subscribe_url" | "unknown_topic" | "stale_message";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `payload_too_large` */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 413;
                        /** @enum {string} */
                        code: "payload_too_large";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `bad_request` */
            415: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 415;
                        /** @enum {string} */
                        code: "bad_request";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `invalid_request` */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 422;
                        /** @enum {string} */
                        code: "invalid_request";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `headers_too_large` */
            431: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 431;
                        /** @enum {string} */
                        code: "headers_too_large";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `service_unavailable`, `certificate_unavailable` */
            503: {
                headers: {
                    /** @description Seconds to wait before trying again. */
                    "Retry-After": string;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 503;
                        /** @enum {string} */
                        code: "service_unavailable" | "certificate_unavailable";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
        };
    };
    receiveWasenderStatus: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": {
                    /** @description messages.update; other events are ignored */
                    event: string;
                    /** @description {key: {id}, update: {status}} or a list of them (required) */
                    data: {
                        [key: string]: unknown;
                    } | unknown[];
                    timestamp?: number;
                };
            };
        };
        responses: {
            /** @description Handled */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        outcomes: ("stored" | "duplicate" | "unknown_message" | "ignored" | "subscription_confirmed")[];
                    };
                };
            };
            /** @description Refused: `malformed_json`, `malformed_encoding`, `malformed_path`, `bad_request`, `malformed` */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 400;
                        /** @enum {string} */
                        code: "malformed_json" | "malformed_encoding" | "malformed_path" | "bad_request" | "malformed";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `invalid_signature` */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 403;
                        /** @enum {string} */
                        code: "invalid_signature";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `payload_too_large` */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 413;
                        /** @enum {string} */
                        code: "payload_too_large";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `bad_request`, `unsupported_media_type` */
            415: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 415;
                        /** @enum {string} */
                        code: "bad_request" | "unsupported_media_type";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `invalid_request` */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 422;
                        /** @enum {string} */
                        code: "invalid_request";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `headers_too_large` */
            431: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 431;
                        /** @enum {string} */
                        code: "headers_too_large";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `service_unavailable` */
            503: {
                headers: {
                    /** @description Seconds to wait before trying again. */
                    "Retry-After": string;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 503;
                        /** @enum {string} */
                        code: "service_unavailable";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
        };
    };
    verifyWhatsAppCloudSubscription: {
        parameters: {
            query?: {
                /** @description subscribe */
                "hub.mode"?: string;
                /** @description must equal WHATSAPP_CLOUD_VERIFY_TOKEN */
                "hub.verify_token"?: string;
                /** @description echoed back as text/plain */
                "hub.challenge"?: string;
            };
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description hub.challenge, echoed */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "text/plain": string;
                };
            };
            /** @description Refused: `malformed_json`, `malformed_encoding`, `malformed_path`, `bad_request` */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 400;
                        /** @enum {string} */
                        code: "malformed_json" | "malformed_encoding" | "malformed_path" | "bad_request";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `invalid_verify_token` */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 403;
                        /** @enum {string} */
                        code: "invalid_verify_token";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `payload_too_large` */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 413;
                        /** @enum {string} */
                        code: "payload_too_large";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `bad_request` */
            415: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 415;
                        /** @enum {string} */
                        code: "bad_request";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `invalid_request` */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 422;
                        /** @enum {string} */
                        code: "invalid_request";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `headers_too_large` */
            431: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 431;
                        /** @enum {string} */
                        code: "headers_too_large";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `service_unavailable` */
            503: {
                headers: {
                    /** @description Seconds to wait before trying again. */
                    "Retry-After": string;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 503;
                        /** @enum {string} */
                        code: "service_unavailable";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
        };
    };
    receiveWhatsAppCloudStatus: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": {
                    /** @description whatsapp_business_account */
                    object: string;
                    /** @description [{id, changes: [{field: "messages", value: {statuses: [{id, status, timestamp, errors?}]}}]}] */
                    entry: unknown[];
                };
            };
        };
        responses: {
            /** @description Handled */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        outcomes: ("stored" | "duplicate" | "unknown_message" | "ignored" | "subscription_confirmed")[];
                    };
                };
            };
            /** @description Refused: `malformed_json`, `malformed_encoding`, `malformed_path`, `bad_request`, `malformed` */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 400;
                        /** @enum {string} */
                        code: "malformed_json" | "malformed_encoding" | "malformed_path" | "bad_request" | "malformed";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `invalid_signature` */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 403;
                        /** @enum {string} */
                        code: "invalid_signature";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `payload_too_large` */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 413;
                        /** @enum {string} */
                        code: "payload_too_large";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `bad_request` */
            415: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 415;
                        /** @enum {string} */
                        code: "bad_request";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `invalid_request` */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 422;
                        /** @enum {string} */
                        code: "invalid_request";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `headers_too_large` */
            431: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 431;
                        /** @enum {string} */
                        code: "headers_too_large";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `service_unavailable` */
            503: {
                headers: {
                    /** @description Seconds to wait before trying again. */
                    "Retry-After": string;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 503;
                        /** @enum {string} */
                        code: "service_unavailable";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
        };
    };
    receiveTwilioStatus: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/x-www-form-urlencoded": {
                    /** @description SM… (SmsSid carries the same) */
                    MessageSid: string;
                    /** @description delivered, undelivered and failed are stored; other statuses are ignored */
                    MessageStatus: string;
                    /** @description with undelivered / failed: 30005 and 30006 suppress the number */
                    ErrorCode?: string;
                    To?: string;
                    AccountSid?: string;
                } & {
                    [key: string]: string;
                };
            };
        };
        responses: {
            /** @description Handled */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        /** @enum {string} */
                        outcome: "stored" | "duplicate" | "unknown_message" | "ignored" | "subscription_confirmed";
                    };
                };
            };
            /** @description Refused: `malformed_json`, `malformed_encoding`, `malformed_path`, `bad_request` */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 400;
                        /** @enum {string} */
                        code: "malformed_json" | "malformed_encoding" | "malformed_path" | "bad_request";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `invalid_signature` */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 403;
                        /** @enum {string} */
                        code: "invalid_signature";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `payload_too_large` */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 413;
                        /** @enum {string} */
                        code: "payload_too_large";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `bad_request`, `unsupported_media_type` */
            415: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 415;
                        /** @enum {string} */
                        code: "bad_request" | "unsupported_media_type";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `invalid_request` */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 422;
                        /** @enum {string} */
                        code: "invalid_request";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `headers_too_large` */
            431: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 431;
                        /** @enum {string} */
                        code: "headers_too_large";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `service_unavailable` */
            503: {
                headers: {
                    /** @description Seconds to wait before trying again. */
                    "Retry-After": string;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 503;
                        /** @enum {string} */
                        code: "service_unavailable";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
        };
    };
    receiveSupabaseSendEmail: {
        parameters: {
            query?: never;
            header: {
                /** @description The delivery id Supabase signs (a UUID) */
                "webhook-id": string;
                /** @description Unix seconds; more than 5 minutes from our clock is refused */
                "webhook-timestamp": string;
                /** @description Space-separated `v1,<base64 HMAC-SHA256>` over `<id>.<timestamp>.<raw body>` */
                "webhook-signature": string;
            };
            path?: never;
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": {
                    user: {
                        email?: string;
                        new_email?: string;
                        phone?: string;
                    };
                    email_data: {
                        email_action_type: string;
                        token?: string;
                        token_hash?: string;
                        token_new?: string;
                        token_hash_new?: string;
                        redirect_to?: string;
                        /** Format: uri */
                        site_url: string;
                        old_email?: string;
                        old_phone?: string;
                        provider?: string;
                        factor_type?: string;
                    };
                };
            };
        };
        responses: {
            /** @description Accepted, or refused as Supabase reads a refusal */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": Record<string, never> | {
                        /** @description The refusal, as the problem `code` other routes give */
                        code: string;
                        error: {
                            /** @description The status Supabase answers its user with (422, 429, 503, …) */
                            http_code: number;
                            message: string;
                        };
                    };
                };
            };
            /** @description Refused: `malformed_json`, `malformed_encoding`, `malformed_path`, `bad_request`, `malformed` */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 400;
                        /** @enum {string} */
                        code: "malformed_json" | "malformed_encoding" | "malformed_path" | "bad_request" | "malformed";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `invalid_signature` */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 401;
                        /** @enum {string} */
                        code: "invalid_signature";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `not_found` */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 404;
                        /** @enum {string} */
                        code: "not_found";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `payload_too_large` */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 413;
                        /** @enum {string} */
                        code: "payload_too_large";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `bad_request` */
            415: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 415;
                        /** @enum {string} */
                        code: "bad_request";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `invalid_request` */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 422;
                        /** @enum {string} */
                        code: "invalid_request";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `too_many_requests` */
            429: {
                headers: {
                    /** @description Seconds to wait before trying again. */
                    "Retry-After": string;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 429;
                        /** @enum {string} */
                        code: "too_many_requests";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `headers_too_large` */
            431: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 431;
                        /** @enum {string} */
                        code: "headers_too_large";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `service_unavailable` */
            503: {
                headers: {
                    /** @description Seconds to wait before trying again. */
                    "Retry-After": string;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 503;
                        /** @enum {string} */
                        code: "service_unavailable";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
        };
    };
    receiveSupabaseSendSms: {
        parameters: {
            query?: never;
            header: {
                /** @description The delivery id Supabase signs (a UUID) */
                "webhook-id": string;
                /** @description Unix seconds; more than 5 minutes from our clock is refused */
                "webhook-timestamp": string;
                /** @description Space-separated `v1,<base64 HMAC-SHA256>` over `<id>.<timestamp>.<raw body>` */
                "webhook-signature": string;
            };
            path?: never;
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": {
                    user: {
                        phone?: string;
                    };
                    sms: {
                        otp: string;
                        phone?: string;
                        sms_type?: string;
                    };
                };
            };
        };
        responses: {
            /** @description Accepted, or refused as Supabase reads a refusal */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": Record<string, never> | {
                        /** @description The refusal, as the problem `code` other routes give */
                        code: string;
                        error: {
                            /** @description The status Supabase answers its user with (422, 429, 503, …) */
                            http_code: number;
                            message: string;
                        };
                    };
                };
            };
            /** @description Refused: `malformed_json`, `malformed_encoding`, `malformed_path`, `bad_request`, `malformed` */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 400;
                        /** @enum {string} */
                        code: "malformed_json" | "malformed_encoding" | "malformed_path" | "bad_request" | "malformed";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `invalid_signature` */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 401;
                        /** @enum {string} */
                        code: "invalid_signature";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `not_found` */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 404;
                        /** @enum {string} */
                        code: "not_found";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `payload_too_large` */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 413;
                        /** @enum {string} */
                        code: "payload_too_large";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `bad_request` */
            415: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 415;
                        /** @enum {string} */
                        code: "bad_request";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `invalid_request` */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 422;
                        /** @enum {string} */
                        code: "invalid_request";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `too_many_requests` */
            429: {
                headers: {
                    /** @description Seconds to wait before trying again. */
                    "Retry-After": string;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 429;
                        /** @enum {string} */
                        code: "too_many_requests";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `headers_too_large` */
            431: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 431;
                        /** @enum {string} */
                        code: "headers_too_large";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `service_unavailable` */
            503: {
                headers: {
                    /** @description Seconds to wait before trying again. */
                    "Retry-After": string;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 503;
                        /** @enum {string} */
                        code: "service_unavailable";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
        };
    };
    receiveKratosCourierMessage: {
        parameters: {
            query?: never;
            header: {
                /** @description `Bearer <KRATOS_COURIER_API_KEY>` or `Basic <user:KRATOS_COURIER_API_KEY>` */
                Authorization: string;
            };
            path?: never;
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": {
                    recipient: string;
                    template_type: string;
                    to?: null | string;
                    message_type?: null | ("email" | "sms" | "");
                    recovery_code?: null | string;
                    verification_code?: null | string;
                    login_code?: null | string;
                    registration_code?: null | string;
                    recovery_url?: null | string;
                    verification_url?: null | string;
                    expires_in_minutes?: null | number;
                    changed_at?: null | string;
                    added_at?: null | string;
                    subject?: null | string;
                    body?: null | string;
                };
            };
        };
        responses: {
            /** @description Accepted */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": Record<string, never>;
                };
            };
            /** @description Refused: `malformed_json`, `malformed_encoding`, `malformed_path`, `bad_request`, `malformed` */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 400;
                        /** @enum {string} */
                        code: "malformed_json" | "malformed_encoding" | "malformed_path" | "bad_request" | "malformed";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `invalid_signature` */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 401;
                        /** @enum {string} */
                        code: "invalid_signature";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `not_found` */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 404;
                        /** @enum {string} */
                        code: "not_found";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `payload_too_large` */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 413;
                        /** @enum {string} */
                        code: "payload_too_large";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `bad_request` */
            415: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 415;
                        /** @enum {string} */
                        code: "bad_request";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `invalid_request`, `unsupported_kind`, `invalid_destination`, `unsupported_phone_number`, `invalid_secret`, `invalid_link`, `link_origin_not_allowed`, `invalid_expiry`, `channel_unavailable` */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 422;
                        /** @enum {string} */
                        code: "invalid_request" | "unsupported_kind" | "invalid_destination" | "unsupported_phone_number" | "invalid_secret" | "invalid_link" | "link_origin_not_allowed" | "invalid_expiry" | "channel_unavailable";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `rate_limited`, `destination_budget_exhausted`, `too_many_requests` */
            429: {
                headers: {
                    /** @description Seconds to wait before trying again. */
                    "Retry-After": string;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 429;
                        /** @enum {string} */
                        code: "rate_limited" | "destination_budget_exhausted" | "too_many_requests";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `headers_too_large` */
            431: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 431;
                        /** @enum {string} */
                        code: "headers_too_large";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `service_unavailable`, `upgrade_in_progress` */
            503: {
                headers: {
                    /** @description Seconds to wait before trying again. */
                    "Retry-After": string;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 503;
                        /** @enum {string} */
                        code: "service_unavailable" | "upgrade_in_progress";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
        };
    };
    liveness: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Alive */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        /** @constant */
                        status: "ok";
                    };
                };
            };
            /** @description Refused: `malformed_json`, `malformed_encoding`, `malformed_path`, `bad_request` */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 400;
                        /** @enum {string} */
                        code: "malformed_json" | "malformed_encoding" | "malformed_path" | "bad_request";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `payload_too_large` */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 413;
                        /** @enum {string} */
                        code: "payload_too_large";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `bad_request` */
            415: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 415;
                        /** @enum {string} */
                        code: "bad_request";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `headers_too_large` */
            431: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 431;
                        /** @enum {string} */
                        code: "headers_too_large";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `service_unavailable` */
            503: {
                headers: {
                    /** @description Seconds to wait before trying again. */
                    "Retry-After": string;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 503;
                        /** @enum {string} */
                        code: "service_unavailable";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
        };
    };
    readiness: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Ready */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        /** @constant */
                        status: "ready";
                    };
                };
            };
            /** @description Refused: `malformed_json`, `malformed_encoding`, `malformed_path`, `bad_request` */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 400;
                        /** @enum {string} */
                        code: "malformed_json" | "malformed_encoding" | "malformed_path" | "bad_request";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `payload_too_large` */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 413;
                        /** @enum {string} */
                        code: "payload_too_large";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `bad_request` */
            415: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 415;
                        /** @enum {string} */
                        code: "bad_request";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `headers_too_large` */
            431: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 431;
                        /** @enum {string} */
                        code: "headers_too_large";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `service_unavailable`, `database_unavailable` */
            503: {
                headers: {
                    /** @description Seconds to wait before trying again. */
                    "Retry-After": string;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 503;
                        /** @enum {string} */
                        code: "service_unavailable" | "database_unavailable";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
        };
    };
    getOpenApiDocument: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The document */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        openapi: string;
                    } & {
                        [key: string]: unknown;
                    };
                };
            };
            /** @description Refused: `malformed_json`, `malformed_encoding`, `malformed_path`, `bad_request` */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 400;
                        /** @enum {string} */
                        code: "malformed_json" | "malformed_encoding" | "malformed_path" | "bad_request";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `payload_too_large` */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 413;
                        /** @enum {string} */
                        code: "payload_too_large";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `bad_request` */
            415: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 415;
                        /** @enum {string} */
                        code: "bad_request";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `headers_too_large` */
            431: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 431;
                        /** @enum {string} */
                        code: "headers_too_large";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `service_unavailable` */
            503: {
                headers: {
                    /** @description Seconds to wait before trying again. */
                    "Retry-After": string;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 503;
                        /** @enum {string} */
                        code: "service_unavailable";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
        };
    };
    getMetrics: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Prometheus text exposition format */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "text/plain": string;
                };
            };
            /** @description Refused: `malformed_json`, `malformed_encoding`, `malformed_path`, `bad_request` */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 400;
                        /** @enum {string} */
                        code: "malformed_json" | "malformed_encoding" | "malformed_path" | "bad_request";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `unauthenticated` */
            401: {
                headers: {
                    /** @description The bearer scheme is expected */
                    "WWW-Authenticate": "Bearer";
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 401;
                        /** @enum {string} */
                        code: "unauthenticated";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `not_found` */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 404;
                        /** @enum {string} */
                        code: "not_found";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `payload_too_large` */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 413;
                        /** @enum {string} */
                        code: "payload_too_large";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `bad_request` */
            415: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 415;
                        /** @enum {string} */
                        code: "bad_request";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `headers_too_large` */
            431: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 431;
                        /** @enum {string} */
                        code: "headers_too_large";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
            /** @description Refused: `service_unavailable` */
            503: {
                headers: {
                    /** @description Seconds to wait before trying again. */
                    "Retry-After": string;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"] & ({
                        /** @constant */
                        status: 503;
                        /** @enum {string} */
                        code: "service_unavailable";
                    } & {
                        [key: string]: unknown;
                    });
                };
            };
        };
    };
}
