CREATE TABLE `ssf_queued_sets` (
	`stream_id` text NOT NULL,
	`jti` text NOT NULL,
	`claims` text NOT NULL,
	`created_at` integer NOT NULL,
	`attempts` integer DEFAULT 0 NOT NULL,
	`next_attempt_at` integer NOT NULL,
	PRIMARY KEY(`stream_id`, `jti`)
);
--> statement-breakpoint
CREATE TABLE `ssf_received_sets` (
	`issuer` text NOT NULL,
	`jti` text NOT NULL,
	`received_at` integer NOT NULL,
	PRIMARY KEY(`issuer`, `jti`)
);
--> statement-breakpoint
CREATE TABLE `ssf_receivers` (
	`id` text PRIMARY KEY NOT NULL,
	`name` text NOT NULL,
	`audience` text NOT NULL,
	`secret_hash` text NOT NULL,
	`created_at` integer NOT NULL,
	`revoked_at` integer
);
--> statement-breakpoint
CREATE TABLE `ssf_stream_subjects` (
	`stream_id` text NOT NULL,
	`user_id` text NOT NULL,
	`included` integer NOT NULL,
	PRIMARY KEY(`stream_id`, `user_id`)
);
--> statement-breakpoint
CREATE TABLE `ssf_streams` (
	`id` text PRIMARY KEY NOT NULL,
	`receiver_id` text NOT NULL,
	`events_requested` text NOT NULL,
	`events_delivered` text NOT NULL,
	`delivery_method` text NOT NULL,
	`endpoint_url` text,
	`authorization_header` text,
	`description` text,
	`status` text NOT NULL,
	`reason` text,
	`created_at` integer NOT NULL,
	`updated_at` integer NOT NULL,
	`verification_requested_at` integer
);
--> statement-breakpoint
CREATE INDEX `ssf_streams_receiver_id_idx` ON `ssf_streams` (`receiver_id`);