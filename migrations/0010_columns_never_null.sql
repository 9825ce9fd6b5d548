PRAGMA foreign_keys=OFF;--> statement-breakpoint
CREATE TABLE `__new_session_events` (
	`id` integer PRIMARY KEY NOT NULL,
	`user_id` text NOT NULL,
	`type` text NOT NULL,
	`session_id` text NOT NULL,
	`actor_session_id` text,
	`ip_address` text,
	`created_at` integer NOT NULL,
	`request_id` text NOT NULL,
	`reason` text,
	`device_key` text NOT NULL,
	`new_device` integer,
	`assurance_level` integer,
	`previous_assurance_level` integer,
	`pending_delivery` integer DEFAULT false NOT NULL
);
--> statement-breakpoint
INSERT INTO `__new_session_events`("id", "user_id", "type", "session_id", "actor_session_id", "ip_address", "created_at", "request_id", "reason", "device_key", "new_device", "assurance_level", "previous_assurance_level", "pending_delivery") SELECT "id", "user_id", "type", "session_id", "actor_session_id", "ip_address", "created_at", "request_id", "reason", "device_key", "new_device", "assurance_level", "previous_assurance_level", "pending_delivery" FROM `session_events`;--> statement-breakpoint
DROP TABLE `session_events`;--> statement-breakpoint
ALTER TABLE `__new_session_events` RENAME TO `session_events`;--> statement-breakpoint
PRAGMA foreign_keys=ON;--> statement-breakpoint
CREATE INDEX `session_events_pending_idx` ON `session_events` (`id`) WHERE "session_events"."pending_delivery" = 1;--> statement-breakpoint
CREATE TABLE `__new_sessions` (
	`id` text PRIMARY KEY NOT NULL,
	`secret_hash` text NOT NULL,
	`user_id` text NOT NULL,
	`ip_address` text,
	`user_agent` text NOT NULL,
	`browser` text,
	`os` text,
	`device_type` text NOT NULL,
	`country` text,
	`city` text,
	`created_at` integer NOT NULL,
	`expires_at` integer NOT NULL,
	`last_active_at` integer NOT NULL,
	`ttl_seconds` integer NOT NULL,
	`device_key` text NOT NULL,
	`auth_proofs` text,
	`assurance_level` integer,
	`authenticated_at` integer NOT NULL,
	`dbsc_challenge` text,
	`dbsc_key_thumbprint` text,
	`bound_cookie_hash` text,
	`bound_cookie_expires_at` integer,
	`previous_bound_cookie_hash` text,
	`previous_bound_cookie_expires_at` integer
);
--> statement-breakpoint
INSERT INTO `__new_sessions`("id", "secret_hash", "user_id", "ip_address", "user_agent", "browser", "os", "device_type", "country", "city", "created_at", "expires_at", "last_active_at", "ttl_seconds", "device_key", "auth_proofs", "assurance_level", "authenticated_at", "dbsc_challenge", "dbsc_key_thumbprint", "bound_cookie_hash", "bound_cookie_expires_at", "previous_bound_cookie_hash", "previous_bound_cookie_expires_at") SELECT "id", "secret_hash", "user_id", "ip_address", "user_agent", "browser", "os", "device_type", "country", "city", "created_at", "expires_at", "last_active_at", "ttl_seconds", "device_key", "auth_proofs", "assurance_level", "authenticated_at", "dbsc_challenge", "dbsc_key_thumbprint", "bound_cookie_hash", "bound_cookie_expires_at", "previous_bound_cookie_hash", "previous_bound_cookie_expires_at" FROM `sessions`;--> statement-breakpoint
DROP TABLE `sessions`;--> statement-breakpoint
ALTER TABLE `__new_sessions` RENAME TO `sessions`;--> statement-breakpoint
CREATE INDEX `sessions_user_id_expires_at_idx` ON `sessions` (`user_id`,`expires_at`);--> statement-breakpoint
CREATE INDEX `sessions_expires_at_idx` ON `sessions` (`expires_at`);--> statement-breakpoint
CREATE TABLE `__new_ssf_received_sets` (
	`issuer` text NOT NULL,
	`jti` text NOT NULL,
	`received_at` integer NOT NULL,
	`bucket` text NOT NULL,
	PRIMARY KEY(`issuer`, `jti`)
);
--> statement-breakpoint
INSERT INTO `__new_ssf_received_sets`("issuer", "jti", "received_at", "bucket") SELECT "issuer", "jti", "received_at", "bucket" FROM `ssf_received_sets`;--> statement-breakpoint
DROP TABLE `ssf_received_sets`;--> statement-breakpoint
ALTER TABLE `__new_ssf_received_sets` RENAME TO `ssf_received_sets`;